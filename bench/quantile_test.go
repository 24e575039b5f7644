package bench

import (
	"math"
	"testing"
)

// The p99 of what a histogram counted between two readings comes from
// the difference of their buckets, interpolated in its bucket; nothing
// counted is NaN, and a quantile past the last finite bound is that bound.
func TestBucketQuantile(t *testing.T) {
	inf := math.Inf(1)
	before := map[float64]float64{0.001: 10, 0.002: 10, 0.004: 10, inf: 10}
	for _, c := range []struct {
		name  string
		after map[float64]float64
		q     float64
		want  float64
	}{
		// 100 new: 50 under 1 ms, 40 in (1, 2], 10 in (2, 4]: the 99th
		// is the 9th of the 10 in (2, 4], 2 + 2 x 9/10 ms
		{"interpolated", map[float64]float64{0.001: 60, 0.002: 100, 0.004: 110, inf: 110}, 0.99, 0.0038},
		{"median", map[float64]float64{0.001: 60, 0.002: 100, 0.004: 110, inf: 110}, 0.5, 0.001},
		{"past the last bound", map[float64]float64{0.001: 10, 0.002: 10, 0.004: 10, inf: 20}, 0.99, 0.004},
	} {
		if got := bucketQuantile(before, c.after, c.q); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
	if got := bucketQuantile(before, before, 0.99); !math.IsNaN(got) {
		t.Errorf("nothing counted: %v, want NaN", got)
	}
}
