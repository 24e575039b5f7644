package bench

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"
)

// row is one line of the table: a figure per run of each system.
type row struct {
	name   string
	unit   string
	lower  bool // lower is better
	get    func(RunResult) float64
	target float64 // presence's target (0: none)
	cmp    string  // "<=" or ">="
}

func rows(o Options) []row {
	kib := func(f func(RunResult) float64) func(RunResult) float64 {
		return func(r RunResult) float64 { return f(r) / 1024 }
	}
	ms := func(f func(RunResult) time.Duration) func(RunResult) float64 {
		return func(r RunResult) float64 { return float64(f(r)) / 1e6 }
	}
	fan := func(q float64) func(RunResult) float64 {
		return func(r RunResult) float64 { return float64(quantile(r.Fanout, q)) / 1e6 }
	}
	fanName, fanTarget := fmt.Sprintf("one offline to %d subscribers", o.Subs*o.Devices), 50.0
	if o.Devices > 1 {
		fanName += fmt.Sprintf(" (%d users x %d devices)", o.Subs, o.Devices)
	}
	if o.Nodes > 1 {
		// issue 9: spread over 3 nodes, the target is 100 ms
		fanName, fanTarget = fanName+fmt.Sprintf(" over %d nodes", o.Nodes), 100
	}
	return []row{
		{"RSS per device after connect", "KiB", true, kib(func(r RunResult) float64 { return r.RSSConnect }), 0, ""},
		{fmt.Sprintf("RSS per device after %v idle", o.Idle), "KiB", true, kib(func(r RunResult) float64 { return r.RSSIdle }), 7, "<="},
		{"heap per device (redis-ttl: Go heap + Redis used_memory)", "KiB", true, kib(func(r RunResult) float64 { return r.Heap }), 6, "<="},
		// seed 002 §5.3's three cost limits: state per connection <= 1.2 KB,
		// a heartbeat <= 128 bytes, its processing <= 0.8 ms at p99
		{"live heap per device, after a forced collection (seed 002: state)", "B", true, func(r RunResult) float64 { return r.LiveHeap }, 1200, "<="},
		{"heartbeat frame on the wire, device to node (seed 002)", "B", true, func(r RunResult) float64 { return r.BeatBytes }, 128, "<="},
		{"answer per heartbeat on the wire, node to device (acks; centrifugo: its ping)", "B", true, func(r RunResult) float64 { return r.AnswerBytes }, 0, ""},
		{"heartbeat processing in the node, p99 (seed 002; presence_heartbeat_processing_seconds)", "ms", true, func(r RunResult) float64 { return r.BeatP99 * 1000 }, 0.8, "<="},
		{"server CPU per heartbeat (user + kernel)", "µs", true, func(r RunResult) float64 { return float64(r.CPUPerBeat) / 1e3 }, 20, "<="},
		{"lookup p99 while heartbeats flow", "ms", true, ms(func(r RunResult) time.Duration { return r.LookupP99 }), 2, "<="},
		{"lookup max while heartbeats flow", "ms", true, ms(func(r RunResult) time.Duration { return r.LookupMax }), 0, ""},
		{fmt.Sprintf("connect rate, %d dials in flight, cold", o.Concurrency), "/s", false, func(r RunResult) float64 { return r.ConnectRate }, 5000, ">="},
		{"server CPU per connect, during the connect phase (user + kernel)", "µs", true, func(r RunResult) float64 { return float64(r.ConnectCPU) / 1e3 }, 0, ""},
		{"load processes' CPU per connect, same phase", "µs", true, func(r RunResult) float64 { return float64(r.LoadCPU) / 1e3 }, 0, ""},
		{fanName + ", p50", "ms", true, fan(0.5), 0, ""},
		{fanName + ", p99", "ms", true, fan(0.99), fanTarget, "<="},
		{fanName + ", max", "ms", true, fan(1), 0, ""},
		{"server CPU per fan-out event, less the heartbeats' rate (user + kernel)", "µs", true, func(r RunResult) float64 { return r.FanoutCost.CPU }, 0, ""},
		{"load processes' CPU per fan-out event, same window", "µs", true, func(r RunResult) float64 { return r.FanoutCost.LoadCPU }, 0, ""},
		{"server threads' wait for a core per fan-out event, less the heartbeats' rate", "µs", true, func(r RunResult) float64 { return r.FanoutCost.Wait }, 0, ""},
		{"load processes' wait for a core per fan-out event, same window", "µs", true, func(r RunResult) float64 { return r.FanoutCost.LoadWait }, 0, ""},
		{"machine's cores idle from a fan-out's first event received to its last", "%", true, func(r RunResult) float64 { return r.FanoutCost.Idle }, 0, ""},
		{"connections ended nobody asked for", "", true, func(r RunResult) float64 { return float64(r.Unexpected) }, 0, "=0"},
	}
}

// spread is min / median / max of xs, leaving out NaN (not measured); all
// NaN when nothing was.
func spread(xs []float64) (lo, med, hi float64) {
	s := slices.DeleteFunc(slices.Clone(xs), math.IsNaN)
	if len(s) == 0 {
		if len(xs) > 0 {
			return math.NaN(), math.NaN(), math.NaN()
		}
		return 0, 0, 0
	}
	slices.Sort(s)
	return s[0], s[len(s)/2], s[len(s)-1]
}

func num(v float64) string {
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.2f", v)
}

// Report writes the table (markdown), one column per system with
// min / median / max over the runs, the ratio of medians, and each target
// of presence as met or missed by how much.
func Report(w io.Writer, o Options, machine string, results []RunResult) {
	o.Defaults()
	reportSetup(w, o, machine)
	reportTable(w, o, results)
	fmt.Fprintln(w)
	for _, res := range results {
		reportRun(w, res)
	}
}

// reportSetup says where and on what workload the figures were taken.
func reportSetup(w io.Writer, o Options, machine string) {
	fmt.Fprintf(w, "machine: %s\n", machine)
	if o.Nodes > 1 {
		fmt.Fprintf(w, "cluster: %d presenced nodes sharing one SQLite store; the peer: %d peer processes on one redis-server; load processes spread evenly\n", o.Nodes, o.Nodes)
	}
	if o.Webhook {
		fmt.Fprintln(w, "webhooks: presence posts every change to one endpoint (a receiver in the bench, answering 200); the peer has none")
	}
	fmt.Fprintf(w, "workload: %d devices per system, heartbeats every %v (%s), %d runs each (min / median / max), lookups at %d/s, %d offline rounds, %s\n\n",
		o.N, o.Interval, map[bool]string{true: "each acked", false: "acks asked as the SDKs ask"}[o.AckEvery],
		o.Runs, o.LookupRate, o.Rounds, map[bool]string{true: "presence.v1.proto", false: "presence.v1.json"}[o.Binary])
}

// reportTable writes the table: a row per figure, a column per system,
// a ratio column per peer, and presence's target.
func reportTable(w io.Writer, o Options, results []RunResult) {
	peers, heads := ratioPeers(o.Systems), []string{"ratio"}
	if peers[0] != "" {
		heads = prefixed("presence vs ", peers, "")
	}
	fmt.Fprintf(w, "| per device | %s | %s | target (presence) |\n|---|%s%s---|\n", strings.Join(o.Systems, " | "),
		strings.Join(heads, " | "), strings.Repeat("---|", len(o.Systems)), strings.Repeat("---|", len(peers)))
	for _, r := range rows(o) {
		meds := map[string]float64{}
		cells := []string{}
		for _, s := range o.Systems {
			var xs []float64
			for _, res := range results {
				if res.System == s {
					xs = append(xs, r.get(res))
				}
			}
			lo, med, hi := spread(xs)
			meds[s] = med
			if math.IsNaN(med) {
				cells = append(cells, "n/a")
				continue
			}
			cells = append(cells, fmt.Sprintf("%s / %s / %s %s", num(lo), num(med), num(hi), r.unit))
		}
		ratios := make([]string, len(peers))
		for i, p := range peers {
			ratios[i] = ratio(r, meds, p)
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s |\n", r.name, strings.Join(cells, " | "), strings.Join(ratios, " | "), verdict(r, results))
	}
}

// reportRun writes what one run counted beside the table: beats, lookups,
// fan-out events, ends, and whatever notes the run left.
func reportRun(w io.Writer, res RunResult) {
	fmt.Fprintf(w, "%s: %d heartbeats in the idle window, %d lookups (%d failed), %d of %d fan-out events, held %v, unexpected ends %d (codes %s), server closes %s\n",
		res.System, res.Beats, res.Lookups, res.LookupErrors, len(res.Fanout), res.FanoutExpected, res.Held.Round(time.Second),
		res.Unexpected, orNone(res.Codes), res.ServerCloses)
	if res.System == "centrifugo" {
		fmt.Fprintln(w, "  (centrifugo: a heartbeat is a server ping answered, a lookup POST /api/presence, the offline a leave push; BENCHMARKS.md)")
	}
	for _, note := range []struct{ prefix, text string }{
		{"", res.FanoutWrites}, {"store: ", res.ConnectStore}, {"", res.Webhooks}, {"first errors: ", res.Errors},
	} {
		if note.text != "" {
			fmt.Fprintf(w, "  %s%s\n", note.prefix, note.text)
		}
	}
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// ratioPeers are the systems presence is compared with: a ratio column
// each (one empty column when presence runs alone or not at all).
func ratioPeers(systems []string) []string {
	peers := slices.DeleteFunc(slices.Clone(systems), func(s string) bool { return s == "presence" })
	if len(peers) == 0 || len(peers) == len(systems) {
		return []string{""}
	}
	return peers
}

// ratio says how many times better presence's median is than peer's.
func ratio(r row, meds map[string]float64, peer string) string {
	p, q := meds["presence"], meds[peer]
	if p == 0 || q == 0 || math.IsNaN(p) || math.IsNaN(q) {
		return ""
	}
	x := q / p
	if !r.lower {
		x = p / q
	}
	switch {
	case x > 0.995 && x < 1.005: // equal to the shown precision
		return "1.00x, the same"
	case x >= 1:
		return fmt.Sprintf("%.2fx better", x)
	}
	return fmt.Sprintf("**%.2fx worse**", 1/x)
}

// verdict judges presence's worst run against the target.
func verdict(r row, results []RunResult) string {
	if r.cmp == "" {
		return ""
	}
	var xs []float64
	for _, res := range results {
		if res.System == "presence" {
			xs = append(xs, r.get(res))
		}
	}
	if len(xs) == 0 {
		return ""
	}
	lo, _, hi := spread(xs)
	if math.IsNaN(hi) {
		return "not measured"
	}
	switch r.cmp {
	case "<=":
		if hi <= r.target {
			return fmt.Sprintf("<= %s: met", num(r.target))
		}
		return fmt.Sprintf("<= %s: **missed** by %s %s (%.1fx)", num(r.target), num(hi-r.target), r.unit, hi/r.target)
	case ">=":
		if lo >= r.target {
			return fmt.Sprintf(">= %s: met", num(r.target))
		}
		return fmt.Sprintf(">= %s: **missed** by %s %s (%.1fx)", num(r.target), num(r.target-lo), r.unit, r.target/lo)
	}
	if hi == 0 {
		return "0: met"
	}
	return fmt.Sprintf("0: **missed** (%s)", num(hi))
}
