package actors

import (
	"time"

	"github.com/presence-im/presence/cluster"
	"github.com/presence-im/presence/config"
	"github.com/presence-im/presence/core"
	"github.com/presence-im/presence/internal/metric"
	"github.com/presence-im/presence/messages"
	"github.com/prometheus/client_golang/prometheus"
)

// Leave modes of a published offline, the label of
// presence_offline_detection_seconds: each has its bound (GET /api/bounds).
const (
	ModeClose        = "close"         // the device or its gateway closed the connection
	ModeHalfOpen     = "half_open"     // the gateway saw no heartbeat for stale
	ModeGatewayCrash = "gateway_crash" // the lease expired or the gateway's node was declared dead
	ModeOwnerCrash   = "owner_crash"   // the view was re-created after its node died and settled offline
)

// LeaveModes lists the modes, in the order of the bounds.
var LeaveModes = []string{ModeClose, ModeHalfOpen, ModeGatewayCrash, ModeOwnerCrash}

// leaveMode maps a lease's end reason to the leave mode it measures.
func leaveMode(r messages.EndReason) string {
	switch r {
	case messages.EndReason_close:
		return ModeClose
	case messages.EndReason_ping_timeout:
		return ModeHalfOpen
	default:
		return ModeGatewayCrash
	}
}

// stateMetrics are the gauges of what this node holds now and the
// detection latency: the figures an operator alerts on.
type stateMetrics struct {
	LeasesHeld    prometheus.Gauge
	DevicesOnline prometheus.Gauge
	UsersOnline   prometheus.Gauge
	Detection     *prometheus.HistogramVec // mode
	Unmeasured    *prometheus.CounterVec   // mode: offlines Detection could not observe
}

// detectionBuckets span the fast preset's bounds (tens of milliseconds)
// to the seed's (a minute and more).
var detectionBuckets = []float64{0.05, 0.1, 0.25, 0.5, 1, 2, 3, 5, 10, 20, 30, 45, 60, 90, 120, 180}

func newStateMetrics() stateMetrics {
	m := stateMetrics{
		LeasesHeld:    metric.Gauge("presence_leases_held", "Lease actors on this node with a live holder (a device up, or a ghost whose connection is gone)."),
		DevicesOnline: metric.Gauge("presence_devices_online", "Devices listed online by the view actors on this node."),
		UsersOnline:   metric.Gauge("presence_users_online", "Users whose view on this node last published online."),
		Detection: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "presence_offline_detection_seconds",
			Help:    "From a user's departure (last sign of life) to the published offline, by leave mode.",
			Buckets: detectionBuckets,
		}, []string{"mode"}),
		Unmeasured: metric.CounterVec("presence_offline_unmeasured_total", "Offlines published with no departure known to measure them from (not in presence_offline_detection_seconds), by leave mode.", "mode"),
	}
	for _, mode := range LeaveModes {
		m.Detection.WithLabelValues(mode) // a series from the start: rate() needs its zero
	}
	m.Unmeasured.WithLabelValues(ModeOwnerCrash) // the one mode that has them (core.ViewResult)
	return m
}

func (m stateMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.LeasesHeld, m.DevicesOnline, m.UsersOnline, m.Detection, m.Unmeasured}
}

// nodeCollector reads what a node holds when scraped: connections on every
// path (WebSocket and in-process), actors by kind, members by state.
type nodeCollector struct {
	n                             *Node
	conns, actors, members, bound *prometheus.Desc
	subscriptions, subscribers    *prometheus.Desc
}

// Collector returns the node's scrape-time gauges; register it once.
func (n *Node) Collector() prometheus.Collector {
	return nodeCollector{n: n,
		conns:         prometheus.NewDesc("presence_connections", "Live device connections on this node, every path (WebSocket and in-process demo devices).", nil, nil),
		actors:        prometheus.NewDesc("presence_actors", "Live actors on this node by kind (gateway, connection, lease, view).", []string{"kind"}, nil),
		members:       prometheus.NewDesc("presence_members", "Cluster members by state as this node's gossip sees them.", []string{"state"}, nil),
		bound:         prometheus.NewDesc("presence_offline_bound_seconds", "The bound on presence_offline_detection_seconds for each leave mode, from this node's timing.", []string{"mode"}, nil),
		subscriptions: prometheus.NewDesc("presence_subscriptions", "Targets the connections on this node are subscribed to, summed over them, by tier (realtime, batched).", []string{"tier"}, nil),
		subscribers:   prometheus.NewDesc("presence_subscribers", "Connections on this node subscribed to at least one target.", nil, nil),
	}
}

func (c nodeCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.conns
	ch <- c.actors
	ch <- c.members
	ch <- c.bound
	ch <- c.subscriptions
	ch <- c.subscribers
}

func (c nodeCollector) Collect(ch chan<- prometheus.Metric) {
	counts := c.n.Counts()
	ch <- prometheus.MustNewConstMetric(c.conns, prometheus.GaugeValue, float64(counts["connection"]))
	for _, k := range []string{"gateway", "connection", string(KindLease), string(KindView)} {
		ch <- prometheus.MustNewConstMetric(c.actors, prometheus.GaugeValue, float64(counts[k]), k)
	}
	states := map[cluster.State]int{cluster.Alive: 0, cluster.Dead: 0, cluster.Left: 0}
	if g := c.n.members; g != nil {
		for _, m := range g.Members() {
			states[m.State]++
		}
	} else {
		states[cluster.Alive] = 1
	}
	for s, v := range states {
		ch <- prometheus.MustNewConstMetric(c.members, prometheus.GaugeValue, float64(v), string(s))
	}
	for mode, d := range ModeBounds(c.n.deps.Timing.Bounds()) {
		ch <- prometheus.MustNewConstMetric(c.bound, prometheus.GaugeValue, d.Seconds(), mode)
	}
	rt, bt, subscribers := c.n.hub.subscriptions()
	ch <- prometheus.MustNewConstMetric(c.subscriptions, prometheus.GaugeValue, float64(rt), "realtime")
	ch <- prometheus.MustNewConstMetric(c.subscriptions, prometheus.GaugeValue, float64(bt), "batched")
	ch <- prometheus.MustNewConstMetric(c.subscribers, prometheus.GaugeValue, float64(subscribers))
}

// ModeBounds is each leave mode's bound.
func ModeBounds(b config.Bounds) map[string]time.Duration {
	return map[string]time.Duration{ModeClose: b.GracefulClose, ModeHalfOpen: b.HalfOpen, ModeGatewayCrash: b.GatewayCrash, ModeOwnerCrash: b.OwnerCrash}
}

// heldDelta moves presence_leases_held by a lease actor's change.
func (m *Metrics) heldDelta(before, after bool) {
	switch {
	case after && !before:
		m.LeasesHeld.Inc()
	case before && !after:
		m.LeasesHeld.Dec()
	}
}

// viewGauge is one view's share of presence_devices_online and
// presence_users_online.
type viewGauge struct{ devices, online float64 }

func viewCounts(v *core.View, stopping bool) viewGauge {
	if v == nil || stopping {
		return viewGauge{}
	}
	g := viewGauge{devices: float64(v.Devices.Len())}
	if v.Online {
		g.online = 1
	}
	return g
}

// viewDelta moves the online gauges by a view actor's change.
func (m *Metrics) viewDelta(before, after viewGauge) {
	if d := after.devices - before.devices; d != 0 {
		m.DevicesOnline.Add(d)
	}
	if d := after.online - before.online; d != 0 {
		m.UsersOnline.Add(d)
	}
}

// preset makes every series of a finite label set from the start, so that
// rate() and increase() see their zero and the metrics table can be
// checked against /metrics (dead letters, by message type, appear with the
// first one).
func (m *Metrics) preset() {
	m.DeviceTransitions.WithLabelValues("up", "")
	for _, r := range []messages.EndReason{messages.EndReason_close, messages.EndReason_ping_timeout, messages.EndReason_lease_expired, messages.EndReason_gateway_down} {
		m.DeviceTransitions.WithLabelValues("down", r.String())
	}
	for _, s := range []string{"online", "offline"} {
		m.Published.WithLabelValues(s)
	}
	for _, p := range []string{"local", "fanout"} {
		m.EventMessages.WithLabelValues(p)
	}
	for _, op := range []string{"acquire", "renew", "release", "gateway_down", "expire"} {
		m.RejectedStale.WithLabelValues(op)
	}
	for _, l := range Limits {
		m.Refused.WithLabelValues(l)
	}
	for _, k := range []Kind{KindLease, KindView} {
		m.Activations.WithLabelValues(string(k))
		m.Passivations.WithLabelValues(string(k))
		m.handled[kindIndex(k)] = m.Messages.WithLabelValues(string(k))
	}
}

// Note sends an event about this node itself (kind fence or drain) to every
// subscribed sink, as member changes are: a history on another member keeps
// it after this node is gone.
func (n *Node) Note(kind, reason string) {
	n.emit(&messages.ObsEvent{Kind: kind, Member: n.deps.NodeID, Reason: reason})
}

// ViewOwner is the member whose view actor serves user (this node alone;
// "" when the owner's address is no member's).
func (n *Node) ViewOwner(user string) string { return n.ownerNode(KindView, user) }

// LeaseOwner is the member whose lease actor serves a device.
func (n *Node) LeaseOwner(user, device string) string {
	return n.ownerNode(KindLease, leaseID(user, device))
}

func (n *Node) ownerNode(kind Kind, identity string) string {
	if n.members == nil {
		return n.deps.NodeID
	}
	addr := n.members.Owner(string(kind), identity)
	if addr == "" {
		return n.deps.NodeID
	}
	return n.memberAt(addr)
}
