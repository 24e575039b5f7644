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
}

func newMetrics(reg prometheus.Registerer, live func() int) *metrics {
	m := &metrics{
		handshakes: metric.CounterVec("presence_ws_handshakes_total", "Device WebSocket handshakes by HTTP status (101 accepted).", "status"),
		closes:     metric.CounterVec("presence_ws_server_closes_total", "Device connections the node closed, by close code (4008: outbox overflow).", "code"),
		acks:       metric.Counter("presence_heartbeat_acks_total", "Heartbeat acks written: one per heartbeat that did not ask for none (ack false); presence_device_heartbeats_total counts the heartbeats read."),
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
		reg.MustRegister(m.handshakes, m.closes, m.acks, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
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
