package bench

import (
	"fmt"
	"os"
	"strings"
	"time"
)

// Background is load processes holding devices on the nodes of a cluster,
// heartbeating, while something else is measured (chaos --load): the same
// `bench worker` processes as make bench, each dialing from its own
// 127.0.0.x (a process holds at most 20,000 files here).
type Background struct {
	ws   []*workerProc
	urls []string
}

// BackgroundOptions: PerNode devices on each of URLs, users bench000000
// up, tokens signed with Secret, heartbeats every Interval.
type BackgroundOptions struct {
	Self     string // the cmd/bench binary
	URLs     []string
	PerNode  int
	Secret   string
	Interval time.Duration
	Dir      string // the load processes' logs
}

// StartBackground starts the load processes and waits until each has
// dialed all of its devices; an error if one could not.
func StartBackground(bo BackgroundOptions) (*Background, error) {
	// Every heartbeat acked (AckEvery): the chaos harness reads the acks
	// of each round as the node still serving its devices (load_idle).
	o := Options{N: bo.PerNode * len(bo.URLs), Nodes: len(bo.URLs), Interval: bo.Interval, Self: bo.Self, Secret: bo.Secret, AckEvery: true}
	o.Defaults()
	if err := os.MkdirAll(bo.Dir, 0o755); err != nil {
		return nil, err
	}
	ws, err := spawnWorkers(o, bo.URLs, bo.Dir)
	if err != nil {
		return nil, err
	}
	b := &Background{ws: ws, urls: bo.URLs}
	for _, w := range ws {
		f, err := w.await("connected", 10*time.Minute)
		if err == nil && f[1] != "0" {
			err = fmt.Errorf("bench: %s of %d background devices could not connect (logs in %s)", f[1], w.count, bo.Dir)
		}
		if err != nil {
			b.Stop()
			return nil, err
		}
	}
	return b, nil
}

// Processes is how many load processes run.
func (b *Background) Processes() int { return len(b.ws) }

// LoadStats is what the load processes dialing one URL saw.
type LoadStats struct {
	Devices    int   // connected
	Acks       int64 // heartbeats acknowledged so far
	Unexpected int64 // connections that ended without the load asking
	Codes      string
}

// Stats sums the load processes of each URL.
func (b *Background) Stats() (map[string]LoadStats, error) {
	out := map[string]LoadStats{}
	for i, w := range b.ws {
		st, err := collectStats([]*workerProc{w})
		if err != nil {
			return nil, err
		}
		u := b.urls[i%len(b.urls)]
		s := out[u]
		s.Devices += int(st.live)
		s.Acks += st.acks
		s.Unexpected += st.unexpected
		if c := codesString(st.codes); c != "" {
			s.Codes = strings.Trim(s.Codes+","+c, ",")
		}
		out[u] = s
	}
	return out, nil
}

// Stop ends the load processes (their connections with them).
func (b *Background) Stop() { stopWorkers(b.ws) }
