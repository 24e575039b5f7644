package webhook

import (
	"fmt"

	"github.com/presence-im/presence/internal/metric"
	"github.com/prometheus/client_golang/prometheus"
)

type metrics struct {
	reg                        prometheus.Registerer
	dropped, storeErrors       prometheus.Counter
	queued, coalesced          *prometheus.CounterVec
	delivered, retried, failed *prometheus.CounterVec
	claimed, rechecked         *prometheus.CounterVec
	waiting                    *prometheus.GaugeVec
	batch                      prometheus.Histogram
}

func newMetrics(reg prometheus.Registerer, maxPending int, pending func() float64) *metrics {
	m := &metrics{
		reg:         reg,
		queued:      metric.CounterVec("presence_webhook_queued_total", "User changes written to the store and queued in memory for the endpoint.", "endpoint"),
		coalesced:   metric.CounterVec("presence_webhook_coalesced_total", "User changes of the endpoint not delivered one by one: its backlog over --webhook-backlog, merged into the user's later change or left to her row in the store (her latest).", "endpoint"),
		dropped:     metric.Counter("presence_webhook_dropped_total", "User changes dropped before the store: too many users waiting for it (the store slow or down)."),
		storeErrors: metric.Counter("presence_webhook_store_errors_total", "Webhook store calls that failed (the change waits, or is delivered again)."),
		delivered:   metric.CounterVec("presence_webhook_delivered_total", "Events the endpoint took (2xx).", "endpoint"),
		retried:     metric.CounterVec("presence_webhook_retried_total", "Events of batches to send again (timeouts, 5xx, 429).", "endpoint"),
		failed:      metric.CounterVec("presence_webhook_failed_total", "Events of batches the endpoint refused (a 4xx but 429): dropped, not retried.", "endpoint"),
		claimed:     metric.CounterVec("presence_webhook_claimed_total", "Rows of a node gone that this node took over.", "endpoint"),
		rechecked:   metric.CounterVec("presence_webhook_rechecked_total", "Users whose view, checked after a claim or a restart, differed from what the receiver was sent: told again.", "endpoint"),
		waiting:     metric.GaugeVec("presence_webhook_waiting", "Rows in the store that this node owns not yet delivered to the endpoint (read every sweep): a sum over the nodes counts each once.", "endpoint"),
		batch: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "presence_webhook_batch_events", Help: "Events per delivered POST.", Buckets: []float64{1, 2, 5, 10, 20, 50, 100, 200, 500},
		}),
	}
	if reg != nil {
		reg.MustRegister(m.queued, m.coalesced, m.dropped, m.storeErrors, m.delivered, m.retried, m.failed, m.claimed, m.rechecked, m.waiting, m.batch,
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "presence_webhook_pending", Help: fmt.Sprintf("User changes waiting in memory for the store (at most %d users: a change of one more is dropped).", maxPending)}, pending))
	}
	return m
}

// endpoint makes an endpoint's series from the start (rate() needs its
// zero), its oldest-change and its backlog gauges.
func (m *metrics) endpoint(ep *endpoint) {
	for _, c := range []*prometheus.CounterVec{m.queued, m.coalesced, m.delivered, m.retried, m.failed, m.claimed, m.rechecked} {
		c.WithLabelValues(ep.label)
	}
	m.waiting.WithLabelValues(ep.label)
	if m.reg != nil {
		labels := prometheus.Labels{"endpoint": ep.label}
		m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "presence_webhook_oldest_seconds", Help: "Age of the oldest change this node is sending to the endpoint.", ConstLabels: labels,
		}, func() float64 { return ep.oldestAge().Seconds() }), prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "presence_webhook_backlog", Help: "User changes this node holds in memory for the endpoint, written and not yet sent (at most --webhook-backlog).", ConstLabels: labels,
		}, func() float64 { return float64(ep.backlogLen()) }))
	}
}
