package cluster

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// gathered sums the samples of a metric family in reg, by its labels' values.
func gathered(t *testing.T, reg *prometheus.Registry, name string) map[string]float64 {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			k := ""
			for _, l := range m.GetLabel() {
				k += l.GetValue()
			}
			out[k] += value(m)
		}
	}
	return out
}

func value(m *dto.Metric) float64 {
	switch {
	case m.GetCounter() != nil:
		return m.GetCounter().GetValue()
	case m.GetGauge() != nil:
		return m.GetGauge().GetValue()
	}
	return 0
}

// A member's gossip is counted in bytes; registering twice is no error
// (the actor transport's counters: TestRemoteTraffic, without -race).
func TestRegisterTraffic(t *testing.T) {
	reg := prometheus.NewRegistry()
	for range 2 {
		if err := RegisterTraffic(reg); err != nil {
			t.Fatal(err)
		}
	}
	g1, _ := startGossip(t, "t1")
	g2, _ := startGossip(t, "t2", g1.Addr())
	defer g1.Shutdown()
	defer g2.Shutdown()
	waitUntil(t, 10*time.Second, "gossip bytes counted", func() bool {
		return gathered(t, reg, "memberlist_udp_sent")[""] > 0 && gathered(t, reg, "memberlist_tcp_sent")[""] > 0
	})
}
