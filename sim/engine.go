package sim

import (
	"container/heap"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/presence-im/presence/config"
	"github.com/presence-im/presence/core"
	"github.com/presence-im/presence/messages"
)

// epoch0 is virtual time zero.
var epoch0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

type event struct {
	at  time.Duration
	seq uint64
	fn  func()
}

type queue []*event

func (q queue) Len() int { return len(q) }
func (q queue) Less(i, j int) bool {
	return q[i].at < q[j].at || q[i].at == q[j].at && q[i].seq < q[j].seq
}
func (q queue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *queue) Push(x any)   { *q = append(*q, x.(*event)) }
func (q *queue) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}

// World is one simulated cluster: gateways with connections, the leases and
// views they feed, one subscriber per user that records when it saw what.
type World struct {
	T    config.Timing
	Seed int64

	now  time.Duration
	seq  uint64
	q    queue
	gws  map[string]*gateway
	leas map[string]*core.Lease
	view map[string]*core.View

	// Observations.
	Offline        map[string][]time.Duration // user -> times an offline reached its subscriber
	Online         map[string][]time.Duration
	Last           map[string]*messages.Presence // user -> the last presence its subscriber got
	Renewals       map[int64]int                 // renewals arriving per virtual second
	Expiries       int
	EarlyExpiries  int // expiries before last renewal + TTL (must stay 0)
	DeviceFlips    int
	PublishedFlips int
}

type gateway struct {
	name    string
	crashed bool
	conns   map[string]*conn
}

type conn struct {
	id, user, device string
	epoch            uint64
	gw               *gateway
	c                core.Conn
	rng              *rand.Rand
	silent           bool // stopped heartbeating (half-open or departed)
	closed           bool
	lose             map[uint64]bool // heartbeat seqs lost on the way
	seq              uint64
	state            core.DeviceState // declared (activity.go)
}

// NewWorld makes an empty world.
func NewWorld(t config.Timing, seed int64) *World {
	return &World{
		T: t, Seed: seed, gws: map[string]*gateway{}, leas: map[string]*core.Lease{}, view: map[string]*core.View{},
		Offline: map[string][]time.Duration{}, Online: map[string][]time.Duration{}, Renewals: map[int64]int{}, Last: map[string]*messages.Presence{},
	}
}

func (w *World) at(d time.Duration, fn func()) {
	w.seq++
	heap.Push(&w.q, &event{at: d, seq: w.seq, fn: fn})
}

func (w *World) after(d time.Duration, fn func()) { w.at(w.now+d, fn) }

func (w *World) wall() time.Time { return epoch0.Add(w.now) }

// Run processes events until the queue is empty or until is reached.
func (w *World) Run(until time.Duration) {
	for w.q.Len() > 0 {
		e := heap.Pop(&w.q).(*event)
		if e.at > until {
			heap.Push(&w.q, e)
			w.now = until
			return
		}
		w.now = e.at
		e.fn()
	}
	w.now = until
}

// Now is the virtual time.
func (w *World) Now() time.Duration { return w.now }

// Gateway starts a gateway whose check ticks begin now.
func (w *World) Gateway(name string) {
	g := &gateway{name: name, conns: map[string]*conn{}}
	w.gws[name] = g
	var tick func()
	tick = func() {
		if g.crashed {
			return
		}
		for _, id := range sortedKeys(g.conns) {
			c := g.conns[id]
			if c.c.Stale(w.wall(), w.T.Stale) {
				w.release(c, messages.EndReason_ping_timeout, c.c.LastAlive)
			}
		}
		w.after(w.T.Check, tick)
	}
	w.after(w.T.Check, tick)
}

// Watch gives user a policy visible to one exact subscriber, "watcher".
func (w *World) Watch(user string) {
	v := core.NewView(user, w.T.Debounce, &core.Policy{Granularity: core.Exact, Contacts: map[string]bool{"watcher": true}}, time.Time{})
	v.Subscribe("watcher", "watcher", w.wall())
	w.view[user] = v
}

// Connect opens a connection of (user, device) on a gateway now, with the
// device's next attempt, and starts its heartbeats and renewals. lose names
// heartbeat seqs that never arrive.
func (w *World) Connect(gw, user, device string, attempt uint64, lose ...uint64) {
	g := w.gws[gw]
	id := fmt.Sprintf("%s/%s/%s/%d", gw, user, device, attempt)
	c := &conn{id: id, user: user, device: device, epoch: attempt, gw: g, c: core.NewConn(w.wall()), rng: core.Rand(w.Seed, id), lose: map[uint64]bool{},
		state: core.NewDeviceState(messages.Platform_other, messages.Activity_activity_unspecified, w.wall(), w.T.IdleAfter)}
	for _, s := range lose {
		c.lose[s] = true
	}
	g.conns[id] = c
	l := w.lease(user, device)
	w.applyLease(user, device, l.Acquire(c.holder(), true, w.wall(), w.T.TTL))
	w.heartbeat(c)
	w.renew(c, true)
}

func (c *conn) holder() *messages.Holder {
	h := &messages.Holder{Node: c.gw.name, ConnId: c.id, Epoch: c.epoch}
	c.state.Fill(h)
	return h
}

func (w *World) heartbeat(c *conn) {
	w.after(core.HeartbeatDelay(c.rng, w.T.Heartbeat, w.T.HeartbeatJitter), func() {
		if c.silent || c.closed || c.gw.crashed {
			return
		}
		c.seq++
		if !c.lose[c.seq] {
			c.c.Heartbeat(w.wall(), c.seq, w.wall().UnixMilli())
		}
		w.heartbeat(c)
	})
}

func (w *World) renew(c *conn, first bool) {
	w.after(core.RenewDelay(c.rng, w.T.Renew, w.T.RenewJitter, first), func() {
		if c.closed || c.gw.crashed {
			return
		}
		w.Renewals[int64(w.now/time.Second)]++
		w.applyLease(c.user, c.device, w.lease(c.user, c.device).Renew(c.holder(), w.wall(), w.T.TTL))
		w.renew(c, false)
	})
}

// Close departs gracefully; HalfOpen goes silent; Crash kills a gateway.
func (w *World) Close(gw, user, device string) {
	for _, c := range w.gws[gw].conns {
		if c.user == user && c.device == device && !c.closed {
			c.silent = true
			w.release(c, messages.EndReason_close, w.wall())
		}
	}
}

func (w *World) HalfOpen(gw, user, device string) {
	for _, c := range w.gws[gw].conns {
		if c.user == user && c.device == device {
			c.silent = true
		}
	}
}

func (w *World) Crash(gw string) { w.gws[gw].crashed = true }

func (w *World) release(c *conn, reason messages.EndReason, lastAlive time.Time) {
	c.closed = true
	delete(c.gw.conns, c.id)
	w.applyLease(c.user, c.device, w.lease(c.user, c.device).Release(c.id, c.epoch, reason, lastAlive))
}

func (w *World) lease(user, device string) *core.Lease {
	k := user + "/" + device
	l, ok := w.leas[k]
	if !ok {
		l = &core.Lease{}
		w.leas[k] = l
	}
	return l
}

// LiveLeases counts leases with a holder.
func (w *World) LiveLeases() int {
	n := 0
	for _, l := range w.leas {
		if l.Live() {
			n++
		}
	}
	return n
}

func (w *World) applyLease(user, device string, res core.LeaseResult) {
	l := w.lease(user, device)
	if res.Expiry != nil {
		gen := res.Expiry.Gen
		w.at(res.Expiry.At.Sub(epoch0), func() {
			if w.leas[user+"/"+device] != l {
				return // lost with its member (OwnerCrash)
			}
			renewedAt := l.RenewedAt
			r := l.Expire(gen, w.wall())
			if r.Down {
				w.Expiries++
				if w.wall().Sub(renewedAt) < w.T.TTL {
					w.EarlyExpiries++
				}
			}
			w.applyLease(user, device, r)
		})
	}
	v := w.view[user]
	if v == nil {
		return
	}
	switch {
	case res.Up:
		w.DeviceFlips++
		w.applyView(v, v.DeviceUp(device, l.Holder, w.wall()))
	case res.Changed:
		w.applyView(v, v.DeviceUp(device, l.Holder, w.wall()))
	case res.Down:
		w.DeviceFlips++
		w.applyView(v, v.DeviceDown(device, l.EndedEpoch, res.LastAlive, w.wall()))
	}
}

func (w *World) applyView(v *core.View, res core.ViewResult) {
	if res.Published {
		w.PublishedFlips++
	}
	for _, d := range res.Deliveries {
		w.Last[v.User] = d.Presence
		switch d.Presence.GetStatus() {
		case messages.Status_offline:
			w.Offline[v.User] = append(w.Offline[v.User], w.now)
		case messages.Status_online:
			w.Online[v.User] = append(w.Online[v.User], w.now)
		}
	}
	if t := res.Debounce; t != nil {
		w.at(t.At.Sub(epoch0), func() { w.applyView(v, v.DebounceFired(t.Gen, w.wall())) })
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
