package sim

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/presence-im/presence/config"
	"github.com/presence-im/presence/core"
)

// Stats summarises a latency sample in seconds.
type Stats struct {
	N      int     `json:"n"`
	Min    float64 `json:"min"`
	Median float64 `json:"median"`
	Max    float64 `json:"max"`
	Bound  float64 `json:"bound"`
	Within bool    `json:"within_bound"`
}

// E01Report is the output of `presencectl sim e01 --json`.
type E01Report struct {
	Preset    string `json:"preset"`
	Seed      int64  `json:"seed"`
	Detection struct {
		GracefulClose Stats `json:"graceful_close"`
		HalfOpen      Stats `json:"half_open"`
		GatewayCrash  Stats `json:"gateway_crash"`
	} `json:"detection"`
	RenewStorm struct {
		Gateways          int     `json:"gateways"`
		Connections       int     `json:"connections"`
		PeakPerSNoJitter  int     `json:"peak_per_s_no_jitter"`
		PeakPerSJitter    int     `json:"peak_per_s_jitter"`
		MeanPerS          float64 `json:"mean_per_s"`
		FinalLeases       int     `json:"final_leases"`
		FinalLeasesJitter int     `json:"final_leases_jitter"`
	} `json:"renew_storm"`
	TTLTooShort struct {
		TTL                       float64 `json:"ttl_s"`
		Renew                     float64 `json:"renew_s"`
		DeviceFlaps               int     `json:"device_flaps"`
		PublishedFlapsDebounce20s int     `json:"published_flaps_debounce_20s"`
		PublishedFlapsDebounce0   int     `json:"published_flaps_debounce_0"`
	} `json:"ttl_too_short"`
	OneLostHeartbeat struct {
		Devices          int `json:"devices"`
		FalseOfflines    int `json:"false_offlines"`
		EarlyExpiries    int `json:"early_expiries"`
		CrashExpiryCount int `json:"crash_expiries_checked"`
	} `json:"lower_bound"`
	LowerBoundOK bool `json:"lower_bound_ok"`
}

// E01Devices is the sample size per leave mode.
const E01Devices = 300

// E01 runs every experiment with timings t and seed.
func E01(t config.Timing, preset string, seed int64) E01Report {
	var r E01Report
	r.Preset, r.Seed = preset, seed
	b := t.Bounds()
	r.Detection.GracefulClose = detect(t, seed, "close", b.GracefulClose)
	r.Detection.HalfOpen = detect(t, seed, "half_open", b.HalfOpen)
	crash, early, n := detectCrash(t, seed, b.GatewayCrash)
	r.Detection.GatewayCrash = crash

	rs := &r.RenewStorm
	rs.Gateways, rs.Connections = 20, 5000
	noJitter := t
	noJitter.RenewJitter = 0
	rs.PeakPerSNoJitter, _, rs.FinalLeases = storm(noJitter, seed, rs.Gateways, rs.Connections)
	rs.PeakPerSJitter, rs.MeanPerS, rs.FinalLeasesJitter = storm(t, seed, rs.Gateways, rs.Connections)

	tt := &r.TTLTooShort
	short := t
	short.TTL, short.RenewJitter = t.Renew*5/6, 0 // seed: TTL 50 s < renew 60 s
	tt.TTL, tt.Renew = short.TTL.Seconds(), short.Renew.Seconds()
	tt.DeviceFlaps, tt.PublishedFlapsDebounce20s = flaps(short, seed)
	short.Debounce = 0
	_, tt.PublishedFlapsDebounce0 = flaps(short, seed)

	lb := &r.OneLostHeartbeat
	lb.Devices = E01Devices
	lb.FalseOfflines = oneLostHeartbeat(t, seed)
	lb.EarlyExpiries, lb.CrashExpiryCount = early, n
	r.LowerBoundOK = lb.FalseOfflines == 0 && early == 0 && n > 0
	return r
}

// span is where departures fall: after every connection has renewed a few
// times, so no run measures a fresh lease.
func span(t config.Timing) (from, to, end time.Duration) {
	from = 10 * t.Renew
	return from, from + 5*t.Renew, from + 5*t.Renew + 2*(t.TTL+t.Stale+t.Debounce)
}

// detect connects E01Devices users, one device each, over one renewal
// interval on 10 gateways, lets each depart at a random moment, and measures
// departure -> offline at its subscriber.
func detect(t config.Timing, seed int64, mode string, bound time.Duration) Stats {
	w := NewWorld(t, seed)
	rng := core.Rand(seed, "detect-"+mode)
	from, to, end := span(t)
	departs := map[string]time.Duration{}
	for g := range 10 {
		w.Gateway(fmt.Sprintf("g%d", g))
	}
	for i := range E01Devices {
		user, gw := fmt.Sprintf("u%03d", i), fmt.Sprintf("g%d", i%10)
		w.Watch(user)
		w.at(time.Duration(rng.Float64()*float64(t.Renew)), func() { w.Connect(gw, user, "d1", 1) })
		d := from + time.Duration(rng.Float64()*float64(to-from))
		departs[user] = d
		w.at(d, func() {
			if mode == "close" {
				w.Close(gw, user, "d1")
			} else {
				w.HalfOpen(gw, user, "d1")
			}
		})
	}
	w.Run(end)
	return latencies(w, departs, bound)
}

// detectCrash puts 30 devices on each of 10 gateways and crashes each
// gateway at its own random moment. It also counts expiries that came before
// last renewal + TTL (the lower bound).
func detectCrash(t config.Timing, seed int64, bound time.Duration) (Stats, int, int) {
	w := NewWorld(t, seed)
	rng := core.Rand(seed, "detect-crash")
	from, to, end := span(t)
	departs := map[string]time.Duration{}
	crashAt := map[string]time.Duration{}
	for g := range 10 {
		name := fmt.Sprintf("g%d", g)
		w.Gateway(name)
		crashAt[name] = from + time.Duration(rng.Float64()*float64(to-from))
		w.at(crashAt[name], func() { w.Crash(name) })
	}
	for i := range E01Devices {
		user, gw := fmt.Sprintf("u%03d", i), fmt.Sprintf("g%d", i%10)
		w.Watch(user)
		w.at(time.Duration(rng.Float64()*float64(t.Renew)), func() { w.Connect(gw, user, "d1", 1) })
		departs[user] = crashAt[gw]
	}
	w.Run(end)
	return latencies(w, departs, bound), w.EarlyExpiries, w.Expiries
}

func latencies(w *World, departs map[string]time.Duration, bound time.Duration) Stats {
	var l []time.Duration
	for _, user := range sortedKeys(departs) {
		d := departs[user]
		for _, at := range w.Offline[user] {
			if at >= d {
				l = append(l, at-d)
				break
			}
		}
	}
	return stats(l, len(departs), bound)
}

func stats(l []time.Duration, want int, bound time.Duration) Stats {
	s := Stats{N: len(l), Bound: secs(bound)}
	if len(l) == 0 {
		return s
	}
	slices.Sort(l)
	med := l[len(l)/2]
	if len(l)%2 == 0 {
		med = (l[len(l)/2-1] + l[len(l)/2]) / 2
	}
	s.Min, s.Median, s.Max = secs(l[0]), secs(med), secs(l[len(l)-1])
	s.Within = len(l) == want && l[len(l)-1] <= bound
	return s
}

func secs(d time.Duration) float64 { return math.Round(d.Seconds()*1000) / 1000 }

// storm starts gateways gateways with conns connections all at once (a
// collective restart) and counts renewals per second over ten intervals.
func storm(t config.Timing, seed int64, gateways, conns int) (peak int, mean float64, final int) {
	w := NewWorld(t, seed)
	for g := range gateways {
		w.Gateway(fmt.Sprintf("g%d", g))
	}
	for i := range conns {
		w.Connect(fmt.Sprintf("g%d", i%gateways), fmt.Sprintf("u%04d", i), "d1", 1)
	}
	w.Run(10 * t.Renew)
	total := 0
	for _, n := range w.Renewals {
		peak = max(peak, n)
		total += n
	}
	return peak, math.Round(float64(total)/(10*t.Renew).Seconds()*10) / 10, w.LiveLeases()
}

// flaps runs one device for 1000 s (seed scale) and counts device-level
// expiries and the published user-level changes after its first online.
func flaps(t config.Timing, seed int64) (deviceFlaps, published int) {
	w := NewWorld(t, seed)
	w.Gateway("g0")
	w.Watch("u")
	w.Connect("g0", "u", "d1", 1)
	first := w.PublishedFlips
	w.Run(time.Duration(1000 * float64(t.Renew) / 60))
	return w.Expiries, w.PublishedFlips - first
}

// oneLostHeartbeat runs E01Devices devices that each lose one random
// heartbeat and counts offlines published for any of them.
func oneLostHeartbeat(t config.Timing, seed int64) int {
	w := NewWorld(t, seed)
	rng := core.Rand(seed, "lost-heartbeat")
	for g := range 10 {
		w.Gateway(fmt.Sprintf("g%d", g))
	}
	for i := range E01Devices {
		user := fmt.Sprintf("u%03d", i)
		w.Watch(user)
		w.Connect(fmt.Sprintf("g%d", i%10), user, "d1", 1, 1+uint64(rng.IntN(20)))
	}
	w.Run(25 * t.Heartbeat)
	n := 0
	for _, at := range w.Offline {
		n += len(at)
	}
	return n
}
