package gateway

import (
	"strconv"

	"github.com/presence-im/presence/internal/metric"
	"github.com/presence-im/presence/messages"
	"github.com/prometheus/client_golang/prometheus"
)

// metrics of the device endpoint.
type metrics struct {
	handshakes *prometheus.CounterVec // status: 101, 400, 401, 403, 409, 426, 429, 503
	closes     *prometheus.CounterVec // code the server closed with
	acks       prometheus.Counter     // heartbeat acks written
	// beatTime is each heartbeat's time in the node, from the read that
	// carried it to its handling's end (its ack written): seed 002's
	// per-heartbeat processing limit (0.8 ms at p99) as a metric.
	beatTime prometheus.Histogram
}

// beatBuckets are 2 µs to about 13 ms, each 1.25 times the last: fine
// enough for a p99 near the seed's 0.8 ms and near the tens of µs a
// heartbeat takes on an idle node.
var beatBuckets = prometheus.ExponentialBuckets(2e-6, 1.25, 40)

func newMetrics(reg prometheus.Registerer, live func() int) *metrics {
	m := &metrics{
		handshakes: metric.CounterVec("presence_ws_handshakes_total", "Device WebSocket handshakes by HTTP status (101 accepted).", "status"),
		closes:     metric.CounterVec("presence_ws_server_closes_total", "Device connections the node closed, by close code (4008: outbox overflow).", "code"),
		acks:       metric.Counter("presence_heartbeat_acks_total", "Heartbeat acks written: one per heartbeat that did not ask for none (ack false); presence_device_heartbeats_total counts the heartbeats read."),
		beatTime: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "presence_heartbeat_processing_seconds",
			Help:    "Each heartbeat's time in the node, from the read that carried it to its handling's end (its ack written, if asked for).",
			Buckets: beatBuckets,
		}),
	}
	// Every series from the start, so that rate() and increase() see their
	// zero and an alert on 429 or 4008 fires on the first one.
	for _, st := range []int{101, 400, 401, 403, 409, 426, 429, 503} {
		m.handshakes.WithLabelValues(strconv.Itoa(st))
	}
	for _, code := range messages.CloseCodes {
		m.closes.WithLabelValues(strconv.Itoa(int(code)))
	}
	if reg != nil {
		reg.MustRegister(m.handshakes, m.closes, m.acks, m.beatTime, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "presence_ws_connections",
			Help: "Open device WebSocket connections.",
		}, func() float64 { return float64(live()) }))
	}
	return m
}

func (m *metrics) handshake(status int) { m.handshakes.WithLabelValues(strconv.Itoa(status)).Inc() }
func (m *metrics) closed(code messages.CloseCode) {
	m.closes.WithLabelValues(strconv.Itoa(int(code))).Inc()
}
