package cluster

import (
	"context"
	"sync"

	gometrics "github.com/hashicorp/go-metrics"
	gmprom "github.com/hashicorp/go-metrics/prometheus"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/stats"
)

// What a member sends to the others, counted by the libraries' own
// counters: memberlist's go-metrics (gossip: memberlist_*, for
// example memberlist_udp_sent and memberlist_tcp_sent,
// in bytes) and a gRPC stats handler on the actor transport
// (presence_remote_*). Both are per process: a node is one process in
// production, while tests that run several nodes in one process read
// their sum.

// remoteTraffic counts the actor transport's connections and bytes.
type remoteTraffic struct {
	bytes *prometheus.CounterVec // dir: in, out (on the wire, gRPC framing included)
	conns *prometheus.GaugeVec   // side: client (dialed), server (accepted)
}

var traffic = &remoteTraffic{
	bytes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "presence_remote_bytes_total",
		Help: "Bytes of actor messages to and from other members (gRPC, on the wire)."}, []string{"dir"}),
	conns: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "presence_remote_connections",
		Help: "Actor transport (gRPC) connections open to other members: client dialed by this member, server accepted."}, []string{"side"}),
}

// bytesIn and bytesOut are traffic.bytes' two series, looked up once: a
// payload of every actor message batch adds to one.
var bytesIn, bytesOut = traffic.bytes.WithLabelValues("in"), traffic.bytes.WithLabelValues("out")

// gossipSink is memberlist's go-metrics sink, installed once per process.
var gossipSink struct {
	once sync.Once
	err  error
}

// RegisterTraffic adds the gossip and actor transport counters to reg.
// Memberlist reports to a process-wide go-metrics sink: the first
// registry gets it, a later one only the actor transport's counters.
func RegisterTraffic(reg prometheus.Registerer) error {
	gossipSink.once.Do(func() {
		sink, err := gmprom.NewPrometheusSinkFrom(gmprom.PrometheusOpts{Registerer: reg, Name: "presence_gossip_sink"})
		if err == nil {
			conf := gometrics.DefaultConfig("")
			conf.EnableHostname, conf.EnableRuntimeMetrics = false, false
			_, err = gometrics.NewGlobal(conf, sink)
		}
		gossipSink.err = err
	})
	if gossipSink.err != nil {
		return gossipSink.err
	}
	for _, l := range []string{"client", "server"} { // exported at 0 before any member speaks (bytes: bytesIn, bytesOut)
		traffic.conns.WithLabelValues(l)
	}
	for _, c := range []prometheus.Collector{traffic.bytes, traffic.conns} {
		if err := reg.Register(c); err != nil {
			if _, ok := err.(prometheus.AlreadyRegisteredError); !ok {
				return err
			}
		}
	}
	return nil
}

// statsHandler feeds the actor transport's counters from gRPC's stats;
// side is "client" for the dialing end, "server" for the accepting one.
type statsHandler struct{ side string }

func (h statsHandler) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context   { return ctx }
func (h statsHandler) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context { return ctx }

func (h statsHandler) HandleRPC(_ context.Context, s stats.RPCStats) {
	switch p := s.(type) {
	case *stats.InPayload:
		bytesIn.Add(float64(p.WireLength))
	case *stats.OutPayload:
		bytesOut.Add(float64(p.WireLength))
	}
}

func (h statsHandler) HandleConn(_ context.Context, s stats.ConnStats) {
	switch s.(type) {
	case *stats.ConnBegin:
		traffic.conns.WithLabelValues(h.side).Inc()
	case *stats.ConnEnd:
		traffic.conns.WithLabelValues(h.side).Dec()
	}
}
