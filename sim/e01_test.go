package sim

import (
	"encoding/json"
	"testing"

	"github.com/presence-im/presence/config"
	"github.com/presence-im/presence/core"
)

// The E01 report with the seed preset: every detection latency within its
// bound for all 300 devices, jitter cuts the renewal peak, the negative
// control flaps, and the run is byte-identical for a seed.
func TestE01SeedWithinBoundsAndDeterministic(t *testing.T) {
	r := E01(config.Seed(), "seed", 1)
	for name, s := range map[string]Stats{
		"graceful_close": r.Detection.GracefulClose, "half_open": r.Detection.HalfOpen, "gateway_crash": r.Detection.GatewayCrash,
	} {
		if s.N != E01Devices || !s.Within || s.Max > s.Bound {
			t.Errorf("%s: %+v: want %d samples within the bound", name, s, E01Devices)
		}
	}
	// E01 6.1: a graceful close is published exactly at the debounce (less
	// the delivery budget the event has to reach the subscriber).
	d := config.Seed().Debounce
	if g, want := r.Detection.GracefulClose, (d - core.DeliveryBudget(d)).Seconds(); g.Min != want || g.Max != want {
		t.Errorf("graceful close %v..%v s, want exactly %v", g.Min, g.Max, want)
	}
	// A crashed gateway's leases end by expiry, never before renewal + TTL.
	if c := r.Detection.GatewayCrash; c.Min < config.Seed().Debounce.Seconds() || !r.LowerBoundOK {
		t.Errorf("crash min %v, lower bound ok %v", c.Min, r.LowerBoundOK)
	}
	rs := r.RenewStorm
	// Without jitter every connection renews in the same second; with it the
	// peak stays under twice the mean (the seed's per-gateway batches: 750/s).
	if rs.PeakPerSNoJitter != rs.Connections || float64(rs.PeakPerSJitter) > 2*rs.MeanPerS {
		t.Errorf("renewal peaks: %d/s without jitter (want %d), %d/s with (want < 2 x mean %.1f/s)", rs.PeakPerSNoJitter, rs.Connections, rs.PeakPerSJitter, rs.MeanPerS)
	}
	if rs.FinalLeases != rs.Connections || rs.FinalLeasesJitter != rs.Connections {
		t.Errorf("final leases %d and %d, want %d", rs.FinalLeases, rs.FinalLeasesJitter, rs.Connections)
	}
	// E01 6.4: TTL 50 s < renew 60 s flaps the lease 16 times in 1000 s; the
	// debounce hides it, no debounce shows every flap.
	tt := r.TTLTooShort
	if tt.DeviceFlaps != 16 || tt.PublishedFlapsDebounce20s != 0 || tt.PublishedFlapsDebounce0 != 2*16 {
		t.Errorf("ttl too short: %+v", tt)
	}
	a, _ := json.Marshal(r)
	b, _ := json.Marshal(E01(config.Seed(), "seed", 1))
	if string(a) != string(b) {
		t.Errorf("two runs with seed 1 differ:\n%s\n%s", a, b)
	}
}

// The fast preset is the seed divided by 100, and so are its figures.
func TestE01FastWithinBounds(t *testing.T) {
	r := E01(config.Fast(), "fast", 2)
	for _, s := range []Stats{r.Detection.GracefulClose, r.Detection.HalfOpen, r.Detection.GatewayCrash} {
		if !s.Within {
			t.Errorf("%+v not within bound", s)
		}
	}
}
