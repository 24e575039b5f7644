package gateway

import (
	"strconv"

	"github.com/presence-im/presence/actors"
	"github.com/prometheus/client_golang/prometheus"
)

// metrics of the device endpoint.
type metrics struct {
	handshakes *prometheus.CounterVec // status: 101, 400, 401, 409, 426, 429, 503
	closes     *prometheus.CounterVec // code the server closed with
}

func newMetrics(reg prometheus.Registerer, live func() int) *metrics {
	m := &metrics{
		handshakes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "presence_ws_handshakes_total",
			Help: "Device WebSocket handshakes by HTTP status (101 accepted).",
		}, []string{"status"}),
		closes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "presence_ws_server_closes_total",
			Help: "Device connections the node closed, by close code (4008: outbox overflow).",
		}, []string{"code"}),
	}
	// Every series from the start, so that rate() and increase() see their
	// zero and an alert on 429 or 4008 fires on the first one.
	for _, st := range []int{101, 400, 401, 409, 426, 429, 503} {
		m.handshakes.WithLabelValues(strconv.Itoa(st))
	}
	for _, code := range []uint16{actors.CloseGoingAway, CloseProtocolError, CloseWrongType, CloseInvalidData, actors.CloseSuperseded, actors.CloseOverflow, CloseTokenExpired} {
		m.closes.WithLabelValues(strconv.Itoa(int(code)))
	}
	if reg != nil {
		reg.MustRegister(m.handshakes, m.closes, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "presence_ws_connections",
			Help: "Open device WebSocket connections.",
		}, func() float64 { return float64(live()) }))
	}
	return m
}

func (m *metrics) handshake(status int) { m.handshakes.WithLabelValues(strconv.Itoa(status)).Inc() }
func (m *metrics) closed(code uint16)   { m.closes.WithLabelValues(strconv.Itoa(int(code))).Inc() }
