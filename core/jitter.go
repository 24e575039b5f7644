package core

import (
	"hash/crc32"
	"math/rand/v2"
	"time"
)

// RenewDelay is the wait before a connection's next lease renewal. The first
// round is uniform in [0, interval] so connections opened together (a gateway
// restart, a reconnect storm) spread over a whole interval at once; later
// rounds are interval x [1-jitter, 1+jitter]. jitter 0 disables both.
func RenewDelay(r *rand.Rand, interval time.Duration, jitter float64, first bool) time.Duration {
	if jitter == 0 {
		return interval
	}
	if first {
		return time.Duration(r.Float64() * float64(interval))
	}
	return time.Duration(float64(interval) * (1 - jitter + 2*jitter*r.Float64()))
}

// HeartbeatDelay is a client's wait before its next heartbeat: the interval
// shortened by up to jitter at random, never lengthened.
func HeartbeatDelay(r *rand.Rand, interval time.Duration, jitter float64) time.Duration {
	return time.Duration(float64(interval) * (1 - jitter*r.Float64()))
}

// Rand returns a random source derived from a node seed and a name (a
// connection or gateway id) with CRC32, so that every run with the same seed
// draws the same numbers whatever the order in which actors start.
func Rand(seed int64, name string) *rand.Rand {
	return rand.New(rand.NewPCG(uint64(seed), uint64(crc32.ChecksumIEEE([]byte(name)))))
}

// Backoff is the wait before try n+1 of something that failed n times
// (n >= 1): base doubled per failure up to limit, each drawn from
// [1/2, 1] of that so that many retrying together spread out.
func Backoff(r *rand.Rand, base, limit time.Duration, n int) time.Duration {
	d := min(base, limit)
	for i := 1; i < n && d < limit; i++ {
		d = min(2*d, limit)
	}
	return time.Duration(float64(d) * (0.5 + 0.5*r.Float64()))
}
