package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
)

// ScaleOptions is the cluster-size bench (`bench scale`, BENCHMARKS.md
// "What grows with the cluster"): for each size a fresh cluster of that
// many presenced processes, PerNode heartbeating devices per node, then
// each node's gossip and actor-transport traffic over Window.
type ScaleOptions struct {
	Options
	Sizes   []int         // cluster sizes, each a fresh cluster
	PerNode int           // devices per node
	Window  time.Duration // the steady window the traffic is read over
}

// ScaleResult is one cluster of one size: Join is from the last node's
// process start to every member seeing every other alive; the rest is per
// node, over the window (bytes per second; connections and RSS at its end).
type ScaleResult struct {
	Nodes, Devices             int
	Join                       time.Duration
	GossipOut, GossipIn        []float64 // memberlist's UDP and TCP bytes sent; UDP received
	RemoteOut, RemoteIn        []float64 // actor messages, on the wire
	RemoteConns, RSSMB, Renews []float64 // transport connections (both sides), RSS, lease renewals per second
}

// scaleCounters are the per-node counters a window reads, by what the
// result calls them.
var scaleCounters = map[string][]string{
	"gossip_out": {"memberlist_udp_sent", "memberlist_tcp_sent"},
	"gossip_in":  {"memberlist_udp_received"},
	"remote_out": {`presence_remote_bytes_total{dir="out"}`},
	"remote_in":  {`presence_remote_bytes_total{dir="in"}`},
	"renewals":   {"presence_lease_renewals_total"},
	"conns":      {"presence_remote_connections"},
}

// RunScale runs every size Runs times.
func RunScale(ctx context.Context, o ScaleOptions) ([]ScaleResult, error) {
	o.Defaults()
	o.Systems = []string{"presence"}
	var out []ScaleResult
	for r := range o.Runs {
		for _, n := range o.Sizes {
			dir, err := os.MkdirTemp(o.Dir, fmt.Sprintf("scale-%d-", n))
			if err != nil {
				return out, err
			}
			res, err := scaleOnce(ctx, o, n, dir)
			if err != nil {
				return out, fmt.Errorf("scale run %d, %d nodes: %w (logs in %s)", r+1, n, err, dir)
			}
			out = append(out, res)
			o.progressf("\r\033[Kscale run %d/%d: %d nodes done\n", r+1, o.Runs, n)
		}
	}
	return out, nil
}

func scaleOnce(ctx context.Context, o ScaleOptions, nodes int, dir string) (ScaleResult, error) {
	res := ScaleResult{Nodes: nodes, Devices: nodes * o.PerNode}
	po := o.Options
	po.Nodes, po.N = nodes, nodes*o.PerNode
	o.progressf("\r\033[Kscale: starting %d nodes", nodes)
	sysI, err := startPresence(po, dir)
	if err != nil {
		return res, err
	}
	sys := sysI.(*presenceSys)
	defer sys.Stop()
	if res.Join, err = sys.allSeeAll(ctx, time.Minute); err != nil {
		return res, err
	}
	var rr RunResult
	ws, err := connect(po, sys, dir, &rr)
	if ws != nil {
		defer stopWorkers(ws)
	}
	if err != nil {
		return res, err
	}
	time.Sleep(time.Until(sys.Settled()))
	before, err := sys.perNode(scaleCounters)
	if err != nil {
		return res, err
	}
	t0 := time.Now()
	o.progressf("\r\033[Kscale: %d nodes, %d devices, reading traffic for %v", nodes, po.N, o.Window)
	select {
	case <-ctx.Done():
		return res, ctx.Err()
	case <-time.After(o.Window):
	}
	after, err := sys.perNode(scaleCounters)
	if err != nil {
		return res, err
	}
	secs := time.Since(t0).Seconds()
	for i := range sys.nodes {
		rate := func(k string) float64 { return (after[i][k] - before[i][k]) / secs }
		res.GossipOut, res.GossipIn = append(res.GossipOut, rate("gossip_out")), append(res.GossipIn, rate("gossip_in"))
		res.RemoteOut, res.RemoteIn = append(res.RemoteOut, rate("remote_out")), append(res.RemoteIn, rate("remote_in"))
		res.Renews = append(res.Renews, rate("renewals"))
		res.RemoteConns = append(res.RemoteConns, after[i]["conns"])
		mb, _ := rss(sys.nodes[i].cmd.Process.Pid)
		res.RSSMB = append(res.RSSMB, mb/(1<<20))
	}
	return res, nil
}

// allSeeAll waits until every node lists every member alive and returns
// how long that took from the last node's process start.
func (s *presenceSys) allSeeAll(ctx context.Context, within time.Duration) (time.Duration, error) {
	deadline := time.Now().Add(within)
	for {
		seen := 0
		for i := range s.admin {
			if s.aliveSeenBy(i) == len(s.nodes) {
				seen++
			}
		}
		if seen == len(s.nodes) {
			return time.Since(s.lastStart), nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return 0, fmt.Errorf("bench: %d of %d nodes see every member alive after %v", seen, len(s.nodes), within)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// aliveSeenBy is how many members node i lists alive.
func (s *presenceSys) aliveSeenBy(i int) int {
	var c struct {
		Members []struct{ State string } `json:"members"`
	}
	res, err := s.getFrom(http.DefaultClient, i, "/api/cluster")
	if err != nil {
		return 0
	}
	defer res.Body.Close()
	_ = json.NewDecoder(res.Body).Decode(&c)
	alive := 0
	for _, m := range c.Members {
		if m.State == "alive" {
			alive++
		}
	}
	return alive
}

// perNode reads each node's /metrics and sums, per node, the series
// each name of want lists (a series named exactly, or with any labels
// when given without).
func (s *presenceSys) perNode(want map[string][]string) ([]map[string]float64, error) {
	out := make([]map[string]float64, len(s.admin))
	for i := range s.admin {
		res, err := s.getFrom(http.DefaultClient, i, "/metrics")
		if err != nil {
			return nil, err
		}
		out[i] = sumSeries(res.Body, want)
		res.Body.Close()
	}
	return out, nil
}

func sumSeries(r io.Reader, want map[string][]string) map[string]float64 {
	m := map[string]float64{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		l := sc.Text()
		k := strings.LastIndexByte(l, ' ')
		if k < 0 || strings.HasPrefix(l, "#") {
			continue
		}
		series, name := l[:k], l[:k]
		if b := strings.IndexByte(series, '{'); b >= 0 {
			name = series[:b]
		}
		v, _ := strconv.ParseFloat(l[k+1:], 64)
		for key, names := range want {
			for _, n := range names {
				if n == series || (n == name && !strings.Contains(n, "{")) {
					m[key] += v
				}
			}
		}
	}
	return m
}

// ScaleReport prints one row per size: min / median / max over the
// nodes of every run of that size.
func ScaleReport(w io.Writer, o ScaleOptions, machine string, rs []ScaleResult) {
	fmt.Fprintf(w, "bench scale: %d devices per node heartbeating every %v, traffic over %v, %d run(s) per size\n%s\n\n",
		o.PerNode, o.Interval, o.Window, o.Runs, machine)
	fmt.Fprintln(w, "| nodes | devices | join: last node started to every member seeing every other alive (s) | gossip sent per node (B/s) | gossip received per node, UDP (B/s) | actor messages sent per node (B/s) | received (B/s) | transport connections per node | lease renewals per node (/s) | RSS per node (MB) |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|")
	for _, n := range o.Sizes {
		var join []float64
		var cols [7][]float64
		for _, r := range rs {
			if r.Nodes != n {
				continue
			}
			join = append(join, r.Join.Seconds())
			for i, xs := range [][]float64{r.GossipOut, r.GossipIn, r.RemoteOut, r.RemoteIn, r.RemoteConns, r.Renews, r.RSSMB} {
				cols[i] = append(cols[i], xs...)
			}
		}
		cells := []string{strconv.Itoa(n), strconv.Itoa(n * o.PerNode), mmm(join, "%.2f")}
		for i, xs := range cols {
			cells = append(cells, mmm(xs, []string{"%.0f", "%.0f", "%.0f", "%.0f", "%.0f", "%.1f", "%.0f"}[i]))
		}
		fmt.Fprintf(w, "| %s |\n", strings.Join(cells, " | "))
	}
	fmt.Fprintln(w, "\nEach cell: min / median / max (join: over runs; the others: over every node of every run).")
}

func mmm(xs []float64, f string) string {
	lo, med, hi := spread(xs)
	return fmt.Sprintf(f+" / "+f+" / "+f, lo, med, hi)
}
