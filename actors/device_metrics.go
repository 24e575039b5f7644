package actors

import (
	"github.com/presence-im/presence/config"
	"github.com/presence-im/presence/internal/metric"
	"github.com/presence-im/presence/messages"
	"github.com/prometheus/client_golang/prometheus"
)

// deviceMetrics count devices by their platform (a label of four values)
// and heartbeat class (two).
type deviceMetrics struct {
	Connections *prometheus.GaugeVec   // platform, class: connections holding their lease
	Heartbeats  *prometheus.CounterVec // platform
	HalfOpen    *prometheus.CounterVec // platform: closed after stale without a sign of life
	Fuses       *prometheus.CounterVec // platform, outcome: tripped, synced, closed
}

// The outcomes of presence_drift_fuses_total.
const (
	FuseTripped = "tripped" // three heartbeats in a row out of order: dirty, state sync asked
	FuseSynced  = "synced"  // the device answered the state sync: clean again
	FuseClosed  = "closed"  // no valid answer in time: closed with 4409
)

func newDeviceMetrics() deviceMetrics {
	m := deviceMetrics{
		Connections: metric.GaugeVec("presence_device_connections", "Device connections holding their lease on this node, by platform and heartbeat class.", "platform", "class"),
		Heartbeats:  metric.CounterVec("presence_device_heartbeats_total", "Heartbeat frames read, by the device's platform (Pings and Pongs not counted).", "platform"),
		HalfOpen:    metric.CounterVec("presence_half_open_closes_total", "Connections closed for no sign of life within their class's stale (half-open), by platform.", "platform"),
		Fuses:       metric.CounterVec("presence_drift_fuses_total", "Drift fuses (three heartbeats in a row whose seq or client time went backwards), by platform and outcome: tripped, synced, closed.", "platform", "outcome"),
	}
	for _, p := range Platforms {
		m.Heartbeats.WithLabelValues(p)
		m.HalfOpen.WithLabelValues(p)
		for _, c := range []string{config.ClassStandard, config.ClassBattery} {
			m.Connections.WithLabelValues(p, c)
		}
		for _, o := range []string{FuseTripped, FuseSynced, FuseClosed} {
			m.Fuses.WithLabelValues(p, o)
		}
	}
	return m
}

func (m deviceMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.Connections, m.Heartbeats, m.HalfOpen, m.Fuses}
}

// Platforms are the label values of the platform label.
var Platforms = []string{"mobile", "desktop", "web", "other"}

// platformLabel is a platform's label value (none given: other).
func platformLabel(p messages.Platform) string {
	if p == messages.Platform_platform_unspecified || messages.Platform_name[int32(p)] == "" {
		return "other"
	}
	return p.String()
}
