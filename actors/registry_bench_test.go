package actors

import (
	"fmt"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
)

// One page of 50 from an index of n live actors, by prefix and cursor: a
// seek and 50 steps, whatever n (docs/operations.md, "The actor list").
func BenchmarkRegistryPage(b *testing.B) {
	for _, n := range []int{1_000, 100_000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			r := newRegistry()
			for i := range n {
				r.add(fmt.Sprintf("user%07d/phone", i), actor.NewPID("local", fmt.Sprintf("$%d", i)))
			}
			b.ReportAllocs()
			after := ""
			for b.Loop() {
				page, next := r.page("user", after, DefaultActorsPage)
				if len(page) != DefaultActorsPage {
					b.Fatalf("%d entries", len(page))
				}
				after = next // "" after the last page: from the first again
			}
		})
	}
}
