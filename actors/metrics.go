package actors

import (
	"fmt"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/presence-im/presence/internal/metric"
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are one node's presence counters. Device-level transitions are
// counted apart from published (user-level) ones: a debounce can hide a
// flapping lease from subscribers, never from these.
type Metrics struct {
	DeviceTransitions *prometheus.CounterVec // direction=up|down, reason
	Published         *prometheus.CounterVec // status=online|offline
	Delivered         prometheus.Counter
	EventMessages     *prometheus.CounterVec // path=local|fanout
	Renewals          prometheus.Counter
	ClientRestarts    prometheus.Counter
	StaleChecks       prometheus.Counter
	RejectedStale     *prometheus.CounterVec        // op=acquire|renew|release
	Passivations      *prometheus.CounterVec        // kind
	Activations       *prometheus.CounterVec        // kind
	Messages          *prometheus.CounterVec        // kind: directory messages handled
	DeadLetters       *prometheus.CounterVec        // message type
	handled           [kindCount]prometheus.Counter // Messages by kindIndex
	Refused           *prometheus.CounterVec        // limit: one of Limits
	Fanout            prometheus.Histogram          // one event's writes on a node
	ViewReads         prometheus.Counter            // lookups answered from a view's state (Node.queryView)
	stateMetrics
	deviceMetrics
	tierMetrics
	degradeMetrics
}

// NewMetrics makes the collectors and registers them with reg (nil: not
// registered, for tests that read them directly).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		DeviceTransitions: metric.CounterVec("presence_device_transitions_total", "Device-level lease ups and downs, by direction and end reason.", "direction", "reason"),
		Published:         metric.CounterVec("presence_published_changes_total", "User-level online/offline changes published after the debounce.", "status"),
		Delivered:         metric.Counter("presence_events_delivered_total", "Trimmed presence events sent to subscriber sinks."),
		EventMessages:     metric.CounterVec("presence_event_messages_total", "Events views handed on, one per trim and subscriber node: local (to their own node's fan-out, no message) or fanout (a message to another node's fan-out actor).", "path"),
		Renewals:          metric.Counter("presence_lease_renewals_total", "Lease renewals accepted."),
		ClientRestarts:    metric.Counter("presence_client_restarts_total", "Heartbeat seqs that started again on a live connection (the client restarted its counter)."),
		StaleChecks:       metric.Counter("presence_stale_checks_total", "Connections told to check their staleness: only those silent for stale, not every connection every check."),
		RejectedStale:     metric.CounterVec("presence_lease_rejected_stale_total", "Lease requests refused for a stale attempt or epoch.", "op"),
		Passivations:      metric.CounterVec("presence_actor_passivations_total", "Idle lease and view actors stopped.", "kind"),
		Activations:       metric.CounterVec("presence_actor_activations_total", "Lease and view actors started.", "kind"),
		Messages:          metric.CounterVec("presence_actor_messages_total", "Messages lease and view actors handled from the directory (sent by any node), by kind.", "kind"),
		DeadLetters:       metric.CounterVec("presence_dead_letters_total", "Messages sent to an actor that had stopped (a passivated or moved lease or view, a closed connection), by message type; logged only at debug.", "message"),
		Refused:           metric.CounterVec("presence_limit_refusals_total", "Requests refused by a limit on what one client can make a node hold (docs/operations.md, Limits), by limit.", "limit"),
		Fanout: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "presence_fanout_seconds",
			Help:    "From a view handing an event to this node's fan-out to the last of its subscribers' frames handed to the socket, per event.",
			Buckets: fanoutBuckets,
		}),
		ViewReads:      metric.Counter("presence_view_reads_total", "Lookups answered from an active local view's state without a message to it; the others are ViewQuery messages (presence_actor_messages_total)."),
		stateMetrics:   newStateMetrics(),
		deviceMetrics:  newDeviceMetrics(),
		tierMetrics:    newTierMetrics(),
		degradeMetrics: newDegradeMetrics(),
	}
	m.preset()
	m.presetTier()
	if reg != nil {
		reg.MustRegister(m.DeviceTransitions, m.Published, m.Delivered, m.EventMessages, m.Renewals, m.ClientRestarts, m.StaleChecks, m.RejectedStale, m.Passivations, m.Activations, m.Messages, m.DeadLetters, m.Refused, m.Fanout, m.ViewReads)
		reg.MustRegister(m.stateMetrics.collectors()...)
		reg.MustRegister(m.deviceMetrics.collectors()...)
		reg.MustRegister(m.tierMetrics.collectors()...)
		reg.MustRegister(m.degradeMetrics.collectors()...)
	}
	return m
}

// fanoutBuckets span one subscriber (tens of microseconds) to thousands of
// them on a loaded node (seconds): issue 9 asks 5,000 within 50 ms.
var fanoutBuckets = []float64{0.0001, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5}

// The limits of presence_limit_refusals_total (config.Limits and the
// gateway's subscribe bucket).
const (
	LimitSubscriptions  = "subscriptions"
	LimitSubscribeRate  = "subscribe_rate"
	LimitActivityRate   = "activity_rate"
	LimitQueryRate      = "query_rate"
	LimitQueriesPending = "queries_pending"
	LimitDevices        = "devices"
	LimitBatch          = "batch"
)

// Limits are the label values of presence_limit_refusals_total.
var Limits = []string{LimitSubscriptions, LimitSubscribeRate, LimitActivityRate, LimitQueryRate, LimitQueriesPending, LimitDevices, LimitBatch}

// countDeadLetters counts the system's dead letters by message type:
// after a member change or a passivation they are routine, so a rate is
// worth watching and each one is not worth a log line.
func countDeadLetters(sys *actor.ActorSystem, c *prometheus.CounterVec) {
	sys.EventStream.Subscribe(func(ev any) {
		if dl, ok := ev.(*actor.DeadLetterEvent); ok {
			c.WithLabelValues(fmt.Sprintf("%T", dl.Message)).Inc()
		}
	})
}
