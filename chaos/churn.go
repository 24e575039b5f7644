package chaos

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/presence-im/presence/client"
	"github.com/presence-im/presence/gateway"
)

// Churn is what the churn scenario measured: its schedule, the samples,
// the baseline and what the nodes held after everyone left.
type Churn struct {
	Seed       uint64         `json:"seed"`
	Users      int            `json:"users"`
	Online     int            `json:"online_target"`
	Residents  int            `json:"residents"`
	Warm       int            `json:"warm_up_devices"`
	Contacts   int            `json:"contacts_per_device"`
	Waves      int            `json:"waves"`
	StaySec    float64        `json:"stay_s"`
	IdleSec    float64        `json:"idle_s"`
	WindowSec  float64        `json:"window_s"`
	ArriveSec  float64        `json:"wave_arrivals_s"`
	PeakOnline int            `json:"peak_online"`
	Failed     int            `json:"failed_devices"`
	Errors     []string       `json:"failed_examples,omitempty"`
	Cut        int            `json:"cut_devices"` // closed by the server before they left
	Retries    int64          `json:"handshake_retries"`
	Events     int            `json:"presence_events"`
	Phases     []Phase        `json:"phases"`
	Cold       []NodeSample   `json:"cold"` // the residents alone, before the warm-up
	Baseline   []NodeSample   `json:"baseline"`
	Peak       []NodeSample   `json:"peak"`
	AfterWave  [][]NodeSample `json:"after_wave"` // settled after each wave's idle window
	Final      []NodeSample   `json:"final"`
	BackSec    float64        `json:"back_to_baseline_s"` // after the last departure; -1: never
	Checks     []Check        `json:"checks"`
	Samples    []ChurnSample  `json:"samples"`
}

// Phase is a moment of the run, drawn on the chart.
type Phase struct {
	Name string    `json:"name"`
	At   time.Time `json:"at"`
}

// Check is one of the churn scenario's verdicts.
type Check struct {
	Name   string `json:"name"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail"`
}

func (c *Churn) phase(name string) { c.Phases = append(c.Phases, Phase{name, time.Now()}) }

// churnFleet drives the sessions of a plan: each dials its node, subscribes
// to its contacts, heartbeats while it stays and closes.
type churnFleet struct {
	secret string
	nodes  []*Node
	online atomic.Int64
	peak   atomic.Int64
	retry  atomic.Int64
}

// launch starts each session at t0 + its At (it returns once the last has
// started); the WaitGroup ends when all have left.
func (f *churnFleet) launch(ctx context.Context, ss []*churnSession, t0 time.Time) *sync.WaitGroup {
	wg := &sync.WaitGroup{}
	for _, s := range ss {
		if d := time.Until(t0.Add(s.At)); d > 0 {
			select {
			case <-ctx.Done():
				return wg
			case <-time.After(d):
			}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			f.visit(ctx, s)
		}()
	}
	return wg
}

// visit is one device's stay: a resident stays until ctx ends, and
// connects again when the server cut it.
func (f *churnFleet) visit(ctx context.Context, s *churnSession) {
	s.mu.Lock()
	s.start = time.Now()
	s.mu.Unlock()
	for {
		c, err := f.dial(ctx, s)
		if err != nil {
			s.mu.Lock()
			s.err = err
			s.mu.Unlock()
			return
		}
		s.mu.Lock()
		s.up, s.down = time.Now(), time.Time{}
		s.mu.Unlock()
		f.peak.Store(max(f.peak.Load(), f.online.Add(1)))
		go s.read(ctx, c)
		f.stay(ctx, s, c)
		s.mu.Lock()
		if s.down.IsZero() {
			s.down = time.Now()
		}
		s.mu.Unlock()
		f.online.Add(-1)
		_ = c.Close()
		if !s.Resident || ctx.Err() != nil {
			return
		}
	}
}

// stay subscribes s to its contacts and heartbeats until it leaves (a
// resident: until ctx ends) or the connection fails.
func (f *churnFleet) stay(ctx context.Context, s *churnSession, c *client.Conn) {
	if len(s.Contacts) > 0 {
		_ = c.Subscribe(ctx, "c", s.Contacts...)
	}
	until := time.Now().Add(s.Stay)
	if s.Resident {
		until = time.Now().Add(24 * time.Hour)
	}
	beat := time.Duration(c.Hello.GetHeartbeatIntervalMs()) * time.Millisecond * 8 / 10
	for seq := uint64(1); time.Now().Before(until) && ctx.Err() == nil; seq++ {
		if c.Heartbeat(ctx, seq) != nil {
			return
		}
		select {
		case <-ctx.Done():
		case <-time.After(min(beat, time.Until(until))):
		}
	}
}

// read counts the presence events s receives until its connection ends,
// and whether the server cut it before it left.
func (s *churnSession) read(ctx context.Context, c *client.Conn) {
	for {
		fr, err := c.Next(ctx)
		if err != nil {
			s.mu.Lock()
			if s.down.IsZero() && ctx.Err() == nil {
				s.cut++
				s.down = time.Now()
			}
			s.mu.Unlock()
			return
		}
		if fr.GetPresence() != nil {
			s.mu.Lock()
			s.events++
			s.mu.Unlock()
		}
	}
}

// dial connects s to its node, trying again for up to 10 s after a refused
// handshake (429, 503) or a connection the server dropped (each try is
// counted in retry).
func (f *churnFleet) dial(ctx context.Context, s *churnSession) (*client.Conn, error) {
	tok, err := gateway.Tokens{Key: []byte(f.secret)}.Mint(s.User, "phone", time.Hour)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		n := f.nodes[s.Node%len(f.nodes)]
		c, err := client.Dial(ctx, "ws://"+n.Listen+"/ws", client.DialOptions{Token: tok, Attempt: uint64(time.Now().UnixMilli())})
		if err == nil {
			return c, nil
		}
		var he *client.HandshakeError
		if errors.As(err, &he) && he.Status != 429 && he.Status != 503 || time.Now().After(deadline) || ctx.Err() != nil {
			return nil, fmt.Errorf("chaos: dial %s on %s: %w", s.User, n.ID, err)
		}
		f.retry.Add(1)
		wait := 100 * time.Millisecond
		if he != nil {
			wait = max(he.RetryAfter/10, 50*time.Millisecond)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(wait):
		}
	}
}

// awaitUp waits until every session of ss is up, or failed.
func awaitUp(ctx context.Context, ss []*churnSession, within time.Duration) error {
	deadline := time.Now().Add(within)
	for _, s := range ss {
		for {
			s.mu.Lock()
			up, err := !s.up.IsZero(), s.err
			s.mu.Unlock()
			if err != nil {
				return err
			}
			if up {
				break
			}
			if time.Now().After(deadline) || ctx.Err() != nil {
				return fmt.Errorf("chaos: %s not connected within %v", s.User, within)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return nil
}
