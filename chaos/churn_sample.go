package chaos

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// NodeSample is what one node's /metrics said at one moment.
type NodeSample struct {
	Node         string  `json:"node"`
	Lease        float64 `json:"lease"` // presence_actors{kind}
	View         float64 `json:"view"`
	Connection   float64 `json:"connection"`
	Connections  float64 `json:"connections"`      // presence_connections
	Devices      float64 `json:"devices_online"`   // presence_devices_online
	Passivations float64 `json:"passivations"`     // presence_actor_passivations_total, every kind
	Activations  float64 `json:"activations"`      // presence_actor_activations_total, every kind
	RSS          float64 `json:"rss_bytes"`        // process_resident_memory_bytes
	Heap         float64 `json:"heap_inuse_bytes"` // go_memstats_heap_inuse_bytes: spans holding objects
	Free         float64 `json:"heap_free_bytes"`  // go_memstats_heap_idle_bytes - go_memstats_heap_released_bytes: free heap pages still resident
	Stacks       float64 `json:"stack_bytes"`      // go_memstats_stack_inuse_bytes
	// Unchecked: a settled reading whose collection count never showed
	// its own collection alone (collected), its live heap perhaps another's.
	Unchecked bool    `json:"unchecked_collection,omitempty"`
	Live      float64 `json:"heap_live_bytes"`   // go_gc_heap_live_bytes: the objects the last collection marked live
	GCs       float64 `json:"gc_cycles"`         // go_gc_cycles_total_gc_cycles_total: collections so far
	CPU       float64 `json:"cpu_seconds"`       // process_cpu_seconds_total
	Fenced    float64 `json:"last_fence_unix_s"` // presence_last_fence_timestamp_seconds
	Err       string  `json:"err,omitempty"`
}

// ChurnSample is every node's metrics at one moment, with the devices the
// harness had connected then.
type ChurnSample struct {
	At     time.Time    `json:"at"`
	Online int          `json:"online"`
	Nodes  []NodeSample `json:"nodes"`
	// LeaseLimit and ViewLimit are the most actors the checks allowed at
	// this sample, over the cluster (0: not checked).
	LeaseLimit float64 `json:"lease_limit,omitempty"`
	ViewLimit  float64 `json:"view_limit,omitempty"`
}

// total sums f over the nodes.
func (s ChurnSample) total(f func(NodeSample) float64) float64 {
	var t float64
	for _, n := range s.Nodes {
		t += f(n)
	}
	return t
}

func leaseOf(n NodeSample) float64 { return n.Lease }
func viewOf(n NodeSample) float64  { return n.View }

// Metrics reads the node's /metrics, uncompressed: a gzip response leaves
// a pooled gzip writer in the node's heap, there or not at each reading,
// so that a small node's live heap moved with the harness's own scrapes
// by more than the checks allow.
func (n *Node) Metrics(ctx context.Context) (map[string]*dto.MetricFamily, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+n.Admin+"/metrics", nil)
	req.Header.Set("Accept-Encoding", "identity")
	if n.Token != "" {
		req.Header.Set("Authorization", "Bearer "+n.Token)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	if res.StatusCode != 200 {
		return nil, fmt.Errorf("chaos: %s /metrics: %d", n.ID, res.StatusCode)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	return parser.TextToMetricFamilies(res.Body)
}

// HeapProfile has the node collect its garbage and write its heap profile
// (GET /debug/pprof/heap?gc=1, the admin API's profiling endpoint) to
// path, so that its heap in use is its live heap and `go tool pprof -base`
// can tell what stayed.
func (n *Node) HeapProfile(ctx context.Context, path string) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+n.Admin+"/debug/pprof/heap?gc=1", nil)
	if n.Token != "" {
		req.Header.Set("Authorization", "Bearer "+n.Token)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode != 200 {
		return fmt.Errorf("chaos: %s heap profile: %d", n.ID, res.StatusCode)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(f, res.Body)
	return err
}

// SettleSamples is the most samples settled takes waiting for RSS to
// stay put.
const SettleSamples = 15

// steady reports whether every node's RSS stayed within 2% over ss.
func steady(ss []ChurnSample) bool {
	for i := range ss[0].Nodes {
		lo, hi := ss[0].Nodes[i].RSS, ss[0].Nodes[i].RSS
		for _, s := range ss[1:] {
			if len(s.Nodes) <= i {
				return false
			}
			lo, hi = min(lo, s.Nodes[i].RSS), max(hi, s.Nodes[i].RSS)
		}
		if hi > lo*1.02 {
			return false
		}
	}
	return true
}

// value sums the series of family name whose labels include want.
func value(mfs map[string]*dto.MetricFamily, name string, want ...string) float64 {
	mf := mfs[name]
	if mf == nil {
		return 0
	}
	var t float64
	for _, m := range mf.GetMetric() {
		if !hasLabels(m, want) {
			continue
		}
		switch {
		case m.Gauge != nil:
			t += m.GetGauge().GetValue()
		case m.Counter != nil:
			t += m.GetCounter().GetValue()
		}
	}
	return t
}

// hasLabels: want is name, value, name, value...
func hasLabels(m *dto.Metric, want []string) bool {
	for i := 0; i+1 < len(want); i += 2 {
		found := false
		for _, l := range m.GetLabel() {
			if l.GetName() == want[i] && l.GetValue() == want[i+1] {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// sampleNode reads one node's figures; a node that does not answer has
// Err set.
func sampleNode(ctx context.Context, n *Node) NodeSample {
	s := NodeSample{Node: n.ID}
	mfs, err := n.Metrics(ctx)
	if err != nil {
		s.Err = err.Error()
		return s
	}
	s.Lease = value(mfs, "presence_actors", "kind", "lease")
	s.View = value(mfs, "presence_actors", "kind", "view")
	s.Connection = value(mfs, "presence_actors", "kind", "connection")
	s.Connections = value(mfs, "presence_connections")
	s.Devices = value(mfs, "presence_devices_online")
	s.Passivations = value(mfs, "presence_actor_passivations_total")
	s.Activations = value(mfs, "presence_actor_activations_total")
	s.RSS = value(mfs, "process_resident_memory_bytes")
	s.Heap = value(mfs, "go_memstats_heap_inuse_bytes")
	s.Free = value(mfs, "go_memstats_heap_idle_bytes") - value(mfs, "go_memstats_heap_released_bytes")
	s.Stacks = value(mfs, "go_memstats_stack_inuse_bytes")
	// After a collection go_memstats_heap_alloc_bytes is the live heap
	// and what was allocated since: the scrape's own encoding among it,
	// enough to move it by more than the heap profile of the same
	// collection did.
	s.Live = value(mfs, "go_gc_heap_live_bytes")
	s.GCs = value(mfs, "go_gc_cycles_total_gc_cycles_total")
	if mfs["go_gc_heap_live_bytes"] == nil || mfs["go_gc_cycles_total_gc_cycles_total"] == nil {
		s.Err = "no go_gc_heap_live_bytes or go_gc_cycles_total_gc_cycles_total in its metrics (a presenced older than this harness?)"
	}
	s.CPU = value(mfs, "process_cpu_seconds_total")
	s.Fenced = value(mfs, "presence_last_fence_timestamp_seconds")
	return s
}

// sampler reads every node's metrics once a second and keeps them.
type sampler struct {
	nodes  []*Node
	online func() int

	mu      sync.Mutex
	samples []ChurnSample
}

// take reads every node now (each with read) and keeps the sample.
func (sp *sampler) take(ctx context.Context, read func(context.Context, *Node) NodeSample) ChurnSample {
	s := ChurnSample{At: time.Now(), Online: sp.online()}
	for _, n := range sp.nodes {
		s.Nodes = append(s.Nodes, read(ctx, n))
	}
	sp.mu.Lock()
	sp.samples = append(sp.samples, s)
	sp.mu.Unlock()
	return s
}

// CollectedTries is how many times collected tries for a reading whose
// figures are those of the collection it asked for.
const CollectedTries = 5

// collected has the node collect its garbage (its heap profile written to
// path) and reads its metrics, so that the live heap is what that
// collection marked: it reads the count of collections before and takes a
// reading in which it went up by exactly one. One more in between (the
// runtime's own, triggered by the profile's encoding or the node's work)
// marks whatever was allocated and still referenced at that moment, a
// large part of a small node's heap where the profile is large (a churn
// under GODEBUG=memprofilerate=4096): such a reading
// is taken again, each try's reading the next one's before; after
// CollectedTries the last one stands, marked Unchecked. A node that does
// not answer gives a reading with Err.
func collected(ctx context.Context, n *Node, path string) NodeSample {
	before := sampleNode(ctx, n)
	for range CollectedTries {
		if before.Err != "" {
			return before
		}
		if err := n.HeapProfile(ctx, path); err != nil {
			return NodeSample{Node: n.ID, Err: err.Error()}
		}
		s := sampleNode(ctx, n)
		if s.Err != "" || s.GCs == before.GCs+1 {
			return s
		}
		before = s
	}
	before.Unchecked = true
	return before
}

// run takes a sample every second until ctx ends.
func (sp *sampler) run(ctx context.Context) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		sp.take(ctx, sampleNode)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Samples is a copy of what was taken so far.
func (sp *sampler) Samples() []ChurnSample {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	out := append([]ChurnSample(nil), sp.samples...)
	// A settled take (a profile and scrapes per node) can end after the
	// run's next ones: the chart and the checks read them in time order.
	slices.SortStableFunc(out, func(a, b ChurnSample) int { return a.At.Compare(b.At) })
	return out
}

// settled reads the nodes every second, each time right after having each
// collect its garbage (collected: the live heap is that collection's; the
// last heap profile stays in dir/<node>-heap-<name>.pb.gz), until each
// node's RSS has moved less than 2% over three readings (the runtime
// returns freed pages to the system in the background) or SettleSamples
// readings, and answers, per node, the median of each figure over the
// last three (medianReading): the baseline, or the state after a wave.
func (sp *sampler) settled(ctx context.Context, dir, name string) []NodeSample {
	var got []ChurnSample
	for len(got) < 3 || !steady(got[len(got)-3:]) && len(got) < SettleSamples && ctx.Err() == nil {
		if len(got) > 0 {
			time.Sleep(time.Second)
		}
		got = append(got, sp.take(ctx, func(ctx context.Context, n *Node) NodeSample {
			return collected(ctx, n, filepath.Join(dir, n.ID+"-heap-"+name+".pb.gz"))
		}))
	}
	got = got[len(got)-3:]
	out := make([]NodeSample, len(sp.nodes))
	for i := range sp.nodes {
		out[i] = medianReading(sp.nodes[i].ID, []NodeSample{got[0].Nodes[i], got[1].Nodes[i], got[2].Nodes[i]})
	}
	return out
}

// medianReading is, figure by figure, the median of a node's readings
// that answered (of two, their mean), the counters from the last of them;
// Unchecked if any was. With none answering it is the last reading, its
// Err set.
func medianReading(node string, rs []NodeSample) NodeSample {
	ok := slices.DeleteFunc(slices.Clone(rs), func(r NodeSample) bool { return r.Err != "" })
	if len(ok) == 0 {
		return rs[len(rs)-1]
	}
	med := func(f func(NodeSample) float64) float64 {
		vs := make([]float64, len(ok))
		for j, r := range ok {
			vs[j] = f(r)
		}
		return median(vs)
	}
	last := ok[len(ok)-1]
	return NodeSample{Node: node, Lease: med(leaseOf), View: med(viewOf),
		Connection:   med(func(n NodeSample) float64 { return n.Connection }),
		Connections:  med(func(n NodeSample) float64 { return n.Connections }),
		Devices:      med(func(n NodeSample) float64 { return n.Devices }),
		RSS:          med(func(n NodeSample) float64 { return n.RSS }),
		Heap:         med(func(n NodeSample) float64 { return n.Heap }),
		Free:         med(func(n NodeSample) float64 { return n.Free }),
		Stacks:       med(func(n NodeSample) float64 { return n.Stacks }),
		Live:         med(func(n NodeSample) float64 { return n.Live }),
		Passivations: last.Passivations, Activations: last.Activations, GCs: last.GCs,
		CPU: last.CPU, Fenced: last.Fenced,
		Unchecked: slices.ContainsFunc(ok, func(r NodeSample) bool { return r.Unchecked })}
}

// median is the median of vs (of an even count, the mean of the middle
// two); it sorts vs.
func median(vs []float64) float64 {
	sort.Float64s(vs)
	if m := len(vs) / 2; len(vs)%2 == 0 {
		return (vs[m-1] + vs[m]) / 2
	}
	return vs[len(vs)/2]
}
