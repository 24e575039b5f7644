package sim

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/presence-im/presence/config"
	"github.com/presence-im/presence/core"
	"github.com/presence-im/presence/messages"
)

// Declare has a device declare its activity now: a change is told to its
// lease at once (a renewal carrying the state), as the connection actor
// does; a declared active lapses to idle after IdleAfter unless declared
// again.
func (w *World) Declare(gw, user, device string, a messages.Activity) {
	c := w.find(gw, user, device)
	if c == nil {
		return
	}
	if c.state.Declare(a, w.wall(), w.T.IdleAfter) {
		w.tell(c)
	}
	if at, ok := c.state.LapseAt(); ok {
		gen := c.state.Gen
		w.at(at.Sub(epoch0), func() {
			if gen == c.state.Gen && !c.closed && c.state.Lapse(w.wall()) {
				w.tell(c)
			}
		})
	}
}

// tell sends a connection's state to its lease, as a renewal.
func (w *World) tell(c *conn) {
	w.applyLease(c.user, c.device, w.lease(c.user, c.device).Renew(c.holder(), w.wall(), w.T.TTL))
}

func (w *World) find(gw, user, device string) *conn {
	for _, c := range w.gws[gw].conns {
		if c.user == user && c.device == device && !c.closed {
			return c
		}
	}
	return nil
}

// OwnerCrash is the death of the member that held every lease and view:
// they are re-created empty (the attempt floors survive in the store),
// the subscriber re-attaches with what it last got, and every live
// connection re-registers within half a renewal, its declared state in
// its holder; the views settle after Settle.
func (w *World) OwnerCrash(settle time.Duration) {
	floors := map[string]uint64{}
	for k, l := range w.leas {
		floors[k] = l.Floor
	}
	w.leas = map[string]*core.Lease{}
	for k, f := range floors {
		w.leas[k] = &core.Lease{Floor: f}
	}
	for user, old := range w.view {
		v := core.NewView(user, w.T.Debounce, old.Policy, old.LastSeen)
		v.Unsettled = true
		v.Reattach("watcher", "watcher", w.Last[user], w.wall())
		w.view[user] = v
		w.after(settle, func() { w.applyView(v, v.Settle(w.wall())) })
	}
	for _, g := range w.gws {
		for _, id := range sortedKeys(g.conns) {
			c := g.conns[id]
			w.after(time.Duration(c.rng.Float64()*float64(w.T.Renew/2)), func() {
				if !c.closed && !c.gw.crashed {
					w.applyLease(c.user, c.device, w.lease(c.user, c.device).Acquire(c.holder(), false, w.wall(), w.T.TTL))
				}
			})
		}
	}
}

// ActivityReport is `presencectl sim activity --json`: devices declare
// activities and change them, the member holding their leases and views
// dies, and after the failover each view must hold what each device
// declared, and each subscriber must have been sent the status derived
// from it.
type ActivityReport struct {
	Preset  string `json:"preset"`
	Seed    int64  `json:"seed"`
	Users   int    `json:"users"`
	Devices int    `json:"devices"`
	// Before and After count the devices whose view holds the declared
	// activity before the crash and after the failover; Seen the users
	// whose subscriber's last presence shows the show derived from the
	// declared activities, after the failover.
	Before int `json:"before"`
	After  int `json:"after"`
	Seen   int `json:"seen"`
	// Lost are devices (or users) that differ after the failover.
	Lost []string `json:"lost,omitempty"`
	OK   bool     `json:"ok"`
}

// Activity runs the scenario: users each with a phone on g1 and a laptop
// on g2, every one declaring a random activity and changing it a few
// times, some laptops left to lapse; then the owner's crash.
func Activity(t config.Timing, preset string, seed int64, users int) ActivityReport {
	w := NewWorld(t, seed)
	w.Gateway("g1")
	w.Gateway("g2")
	rng := rand.New(rand.NewPCG(uint64(seed), 24))
	acts := []messages.Activity{messages.Activity_active, messages.Activity_idle, messages.Activity_background}
	r := ActivityReport{Preset: preset, Seed: seed, Users: users, Devices: 2 * users}
	for i := range users {
		u := fmt.Sprintf("u%03d", i)
		w.Watch(u)
		w.Connect("g1", u, "phone", 1)
		w.Connect("g2", u, "laptop", 1)
		for k := range 3 { // declarations spread over the first idle-after
			at := time.Duration(k+1) * t.IdleAfter / 4
			gw, dev := "g1", "phone"
			if rng.IntN(2) == 1 {
				gw, dev = "g2", "laptop"
			}
			a := acts[rng.IntN(len(acts))]
			w.at(at, func() { w.Declare(gw, u, dev, a) })
		}
	}
	crash := 2 * t.IdleAfter // some actives lapsed by then
	settle := t.Renew/2 + t.Check
	w.Run(crash)
	r.Before = w.matching(&r, false)
	w.OwnerCrash(settle)
	w.Run(crash + settle + t.Check)
	r.After = w.matching(&r, true)
	for _, u := range sortedKeys(w.view) {
		if w.seenDerived(u) {
			r.Seen++
		} else {
			r.Lost = append(r.Lost, u+": subscriber")
		}
	}
	r.OK = r.Before == r.Devices && r.After == r.Devices && r.Seen == users
	return r
}

// matching counts the devices whose view holds their declared activity.
func (w *World) matching(r *ActivityReport, record bool) int {
	n := 0
	for _, g := range w.gws {
		for _, id := range sortedKeys(g.conns) {
			c := g.conns[id]
			d, ok := w.view[c.user].Devices.Get(c.device)
			if ok && d.GetActivity() == c.state.Activity && d.GetStateGen() == c.state.Gen {
				n++
			} else if record {
				r.Lost = append(r.Lost, fmt.Sprintf("%s/%s: view %v, declared %v", c.user, c.device, d.GetActivity(), c.state.Activity))
			}
		}
	}
	return n
}

// seenDerived reports whether user's subscriber was last sent the show
// derived from its devices' declared state.
func (w *World) seenDerived(user string) bool {
	var hs []*messages.Holder
	for _, g := range w.gws {
		for _, id := range sortedKeys(g.conns) {
			if c := g.conns[id]; c.user == user {
				hs = append(hs, c.holder())
			}
		}
	}
	want := core.Derive(core.UserStatus{}, hs, w.wall())
	last := w.Last[user]
	return last.GetStatus() == messages.Status_online && last.GetShow() == want.Show && len(last.GetDevices()) == len(core.Platforms(hs))
}
