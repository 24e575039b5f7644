package chaos

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/presence-im/presence/client"
	"github.com/presence-im/presence/gateway"
	"github.com/presence-im/presence/messages"
)

// Device is one simulated device (user dNNN, device "phone"), connected to
// one node, heartbeating every Heartbeat.
type Device struct {
	User string
	Node *Node

	conn      *client.Conn
	stop      context.CancelFunc // stops its heartbeats
	silent    bool               // heartbeats stopped by Silence
	mu        sync.Mutex
	lastBeat  time.Time
	closeCode int       // how the server closed it (0: open)
	closedAt  time.Time // when the harness read that close
	attempt   uint64
	beatErr   error // why its heartbeats stopped, when a write failed
	// activity is what it last declared (the activity scenario), renew
	// stops the renewal of a declared active.
	activity messages.Activity
	renew    context.CancelFunc
}

// health says what the harness knows of d's connection, for a finding: a
// device whose heartbeat write failed (the harness starved, its socket
// broken) was timed out by the server, rightly.
func (d *Device) health() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	s := fmt.Sprintf("close code %d", d.closeCode)
	if d.beatErr != nil {
		s += fmt.Sprintf(", heartbeats stopped after %s: %v", d.lastBeat.Format("15:04:05.000"), d.beatErr)
	}
	return s
}

// Watcher is one subscriber (user watch-<node>) on a node, subscribed to
// every device's user; it records every presence event it gets.
type Watcher struct {
	User string
	Node *Node

	conn   *client.Conn
	mu     sync.Mutex
	events []Event
}

// Event is one presence event as a watcher received it.
type Event struct {
	Target  string
	Status  messages.Status
	Version uint64
	At      time.Time
	// Snapshot: from a (re)subscription's snapshot, which may start over
	// with a view created anew (SDK watchers).
	Snapshot bool
	// Activities is the activity of each platform online, as an exact
	// contact sees it (the activity scenario checks it).
	Activities []messages.Activity
}

// eventOf is what a watcher records of p.
func eventOf(p *messages.Presence, snapshot bool) Event {
	ev := Event{Target: p.GetUser(), Status: p.GetStatus(), Version: p.GetVersion(), At: time.Now(), Snapshot: snapshot}
	for _, d := range p.GetDevices() {
		ev.Activities = append(ev.Activities, d.GetActivity())
	}
	return ev
}

// Fleet is the devices and watchers of a run.
type Fleet struct {
	Secret    string
	Heartbeat time.Duration
	Devices   []*Device
	Watchers  []*Watcher
}

func (f *Fleet) dial(ctx context.Context, n *Node, user string, attempt uint64) (*client.Conn, error) {
	tok, err := gateway.Tokens{Key: []byte(f.Secret)}.Mint(user, "phone", time.Hour)
	if err != nil {
		return nil, err
	}
	c, err := client.Dial(ctx, "ws://"+n.Listen+"/ws", client.DialOptions{Token: tok, Attempt: attempt})
	if err != nil {
		return nil, fmt.Errorf("chaos: dial %s on %s: %w", user, n.ID, err)
	}
	return c, nil
}

// Connect starts d on its node: it heartbeats until stopped, and reads (so
// that it sees how the server closes it).
func (f *Fleet) Connect(ctx context.Context, d *Device) error {
	d.attempt = max(d.attempt+1, uint64(time.Now().UnixMilli())) // as the SDK: from the clock, growing
	c, err := f.dial(ctx, d.Node, d.User, d.attempt)
	if err != nil {
		return err
	}
	bctx, stop := context.WithCancel(ctx)
	d.mu.Lock()
	d.conn, d.stop, d.closeCode, d.lastBeat, d.silent, d.beatErr = c, stop, 0, time.Now(), false, nil
	d.mu.Unlock()
	go func() {
		for seq := uint64(1); ; seq++ {
			// Under the lock, so that Silence returns the true last
			// heartbeat; with ctx, not bctx: cancelling a write closes the
			// socket.
			d.mu.Lock()
			err := ctx.Err()
			if !d.silent && err == nil {
				if err = c.Heartbeat(ctx, seq); err == nil {
					d.lastBeat = time.Now()
				} else if ctx.Err() == nil {
					d.beatErr = err
				}
			}
			silent := d.silent
			d.mu.Unlock()
			if silent || err != nil {
				return
			}
			select {
			case <-bctx.Done():
				return
			case <-time.After(f.Heartbeat):
			}
		}
	}()
	go func() {
		for {
			// Not bctx: cancelling a read closes the socket, and a
			// silenced device must stay connected, only silent.
			if _, err := c.Next(ctx); err != nil {
				d.mu.Lock()
				if d.conn == c {
					d.closeCode, d.closedAt = client.CloseCode(err), time.Now()
				}
				d.mu.Unlock()
				return
			}
		}
	}()
	return nil
}

// Silence stops d's heartbeats without closing its socket: a half-open
// connection as the server sees it (the server sends no pings, so the
// reads left going answer nothing). It returns the last heartbeat.
func (d *Device) Silence() time.Time {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.silent = true
	return d.lastBeat
}

// Close closes d's connection gracefully.
func (d *Device) Close() {
	d.mu.Lock()
	c, stop := d.conn, d.stop
	d.mu.Unlock()
	stop()
	_ = c.Close()
}

// CloseCode is how the server closed d's connection (0: still open, -1:
// without a close frame).
func (d *Device) CloseCode() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.closeCode
}

// ClosedAt is when the harness read the close of CloseCode.
func (d *Device) ClosedAt() time.Time {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.closedAt
}

// Watch starts w: it subscribes to targets and records events.
func (f *Fleet) Watch(ctx context.Context, w *Watcher, targets []string) error {
	c, err := f.dial(ctx, w.Node, w.User, uint64(time.Now().UnixMilli()))
	if err != nil {
		return err
	}
	w.conn = c
	go func() {
		for seq := uint64(1); ctx.Err() == nil; seq++ {
			if c.Heartbeat(ctx, seq) != nil {
				return
			}
			select {
			case <-ctx.Done():
			case <-time.After(f.Heartbeat):
			}
		}
	}()
	if err := c.Subscribe(ctx, "chaos", targets...); err != nil {
		return err
	}
	snap := make(chan error, 1)
	go func() {
		got := false
		for {
			fr, err := c.Next(ctx)
			if err != nil {
				if !got {
					snap <- err
				}
				return
			}
			if s := fr.GetSnapshot(); s != nil && !got {
				got = true
				w.mu.Lock()
				for _, p := range s.GetPresences() {
					w.events = append(w.events, eventOf(p, false))
				}
				w.mu.Unlock()
				snap <- nil
			}
			if p := fr.GetPresence(); p != nil {
				w.mu.Lock()
				w.events = append(w.events, eventOf(p, false))
				w.mu.Unlock()
			}
		}
	}()
	select {
	case err := <-snap:
		return err
	case <-time.After(10 * time.Second):
		return fmt.Errorf("chaos: %s got no snapshot", w.User)
	}
}

// Events is a copy of what w received.
func (w *Watcher) Events() []Event {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]Event(nil), w.events...)
}

// Last is the newest status w holds for target, and whether it has one.
func (w *Watcher) Last(target string) (Event, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for i := len(w.events) - 1; i >= 0; i-- {
		if w.events[i].Target == target {
			return w.events[i], true
		}
	}
	return Event{}, false
}
