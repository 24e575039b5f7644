package actors

import (
	"fmt"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are one node's presence counters. Device-level transitions are
// counted apart from published (user-level) ones: a debounce can hide a
// flapping lease from subscribers, never from these.
type Metrics struct {
	DeviceTransitions *prometheus.CounterVec // direction=up|down, reason
	Published         *prometheus.CounterVec // status=online|offline
	Delivered         prometheus.Counter
	EventMessages     *prometheus.CounterVec // path=direct|fanout
	Renewals          prometheus.Counter
	ClientRestarts    prometheus.Counter
	RejectedStale     *prometheus.CounterVec // op=acquire|renew|release
	Passivations      *prometheus.CounterVec // kind
	Activations       *prometheus.CounterVec // kind
	DeadLetters       *prometheus.CounterVec // message type
	stateMetrics
}

// NewMetrics makes the collectors and registers them with reg (nil: not
// registered, for tests that read them directly).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		DeviceTransitions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "presence_device_transitions_total",
			Help: "Device-level lease ups and downs, by direction and end reason.",
		}, []string{"direction", "reason"}),
		Published: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "presence_published_changes_total",
			Help: "User-level online/offline changes published after the debounce.",
		}, []string{"status"}),
		Delivered: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "presence_events_delivered_total",
			Help: "Trimmed presence events sent to subscriber sinks.",
		}),
		EventMessages: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "presence_event_messages_total",
			Help: "Messages views sent to carry events: direct (to one sink) or fanout (one per subscriber node, for several sinks there).",
		}, []string{"path"}),
		Renewals: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "presence_lease_renewals_total",
			Help: "Lease renewals accepted.",
		}),
		ClientRestarts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "presence_client_restarts_total",
			Help: "Heartbeat seqs that started again on a live connection (the client restarted its counter).",
		}),
		RejectedStale: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "presence_lease_rejected_stale_total",
			Help: "Lease requests refused for a stale attempt or epoch.",
		}, []string{"op"}),
		Passivations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "presence_actor_passivations_total",
			Help: "Idle lease and view actors stopped.",
		}, []string{"kind"}),
		Activations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "presence_actor_activations_total",
			Help: "Lease and view actors started.",
		}, []string{"kind"}),
		DeadLetters: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "presence_dead_letters_total",
			Help: "Messages sent to an actor that had stopped (a passivated or moved lease or view, a closed connection), by message type; logged only at debug.",
		}, []string{"message"}),
		stateMetrics: newStateMetrics(),
	}
	m.preset()
	if reg != nil {
		reg.MustRegister(m.DeviceTransitions, m.Published, m.Delivered, m.EventMessages, m.Renewals, m.ClientRestarts, m.RejectedStale, m.Passivations, m.Activations, m.DeadLetters)
		reg.MustRegister(m.collectors()...)
	}
	return m
}

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
