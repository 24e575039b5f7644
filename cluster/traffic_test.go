package cluster

import (
	"sync"
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

// testTraffic is the registry every test of this package reads the
// traffic counters from: memberlist's go-metrics sink is process-wide and
// goes to the first registry RegisterTraffic is given, so a test with a
// registry of its own would see no gossip after another test's.
var testTraffic struct {
	once sync.Once
	reg  *prometheus.Registry
	err  error
}

func trafficRegistry(t *testing.T) *prometheus.Registry {
	t.Helper()
	testTraffic.once.Do(func() {
		testTraffic.reg = prometheus.NewRegistry()
		testTraffic.err = RegisterTraffic(testTraffic.reg)
	})
	if testTraffic.err != nil {
		t.Fatal(testTraffic.err)
	}
	return testTraffic.reg
}

// A member's gossip is counted in bytes; registering twice is no error
// (the actor transport's counters: TestRemoteTraffic, without -race).
func TestRegisterTraffic(t *testing.T) {
	reg := trafficRegistry(t)
	if err := RegisterTraffic(reg); err != nil {
		t.Fatal(err)
	}
	udp, tcp := gathered(t, reg, "memberlist_udp_sent")[""], gathered(t, reg, "memberlist_tcp_sent")[""] // other tests' gossip
	g1, _ := startGossip(t, "t1")
	g2, _ := startGossip(t, "t2", g1.Addr())
	defer g1.Shutdown()
	defer g2.Shutdown()
	waitUntil(t, 10*time.Second, "gossip bytes counted", func() bool {
		return gathered(t, reg, "memberlist_udp_sent")[""] > udp && gathered(t, reg, "memberlist_tcp_sent")[""] > tcp
	})
}
