package chaos

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/presence-im/presence/messages"
)

// activities are what the activity scenario's devices declare, in turn.
var activities = []messages.Activity{messages.Activity_active, messages.Activity_idle, messages.Activity_background}

// runActivity: every device declares an activity (a declared active
// renewed within idle-after), every watcher sees it; a node is killed, and
// after the failover the devices still connected elsewhere, those whose
// lease or view died with it among them, must still show what they
// declared, in the route and to every watcher, versions never going back;
// then each declares another one, and the new owners must pass it on.
func runActivity(ctx context.Context, e *Env, r *Round) error {
	idleAfter := ms(e.Timing["idle_after_ms"])
	if idleAfter <= 0 {
		return fmt.Errorf("chaos: the nodes publish no idle_after_ms")
	}
	rctx, stop := context.WithCancel(ctx)
	defer stop() // the renewals
	for i, d := range e.Fleet.Devices {
		if err := d.declare(rctx, activities[(i+r.Index)%len(activities)], idleAfter/3); err != nil {
			return err
		}
	}
	seen := func(ws []*Watcher, ds []*Device, within time.Duration) {
		e.awaitActivity(r, ws, ds, time.Now().Add(within))
	}
	within := ms(e.Timing["debounce_ms"]) + e.Slack
	seen(e.Fleet.Watchers, e.Fleet.Devices, within)

	victim := e.Cluster.Nodes[r.Index%len(e.Cluster.Nodes)]
	via := e.survivor(victim)
	owners, err := e.owners(ctx, via)
	if err != nil {
		return err
	}
	ds := e.devicesOn(victim)
	stayed := e.othersThan(ds)
	moved := 0
	for _, d := range stayed {
		if owners.lost(d, victim) {
			moved++
		}
	}
	r.Victim, r.Fault = victim.ID, fmt.Sprintf("devices declare activities; kill -9 %s (%d devices; %d devices elsewhere had their lease or view on it)", victim.ID, len(ds), moved)
	t0 := time.Now()
	victim.Kill()
	deadline := t0.Add(ms(max(e.Bounds["gateway_crash_ms"], e.Bounds["owner_crash_ms"])) + e.Slack)
	ws := e.watchersBut(victim)
	e.awaitOffline(r, ws, ds, func(*Device) time.Time { return t0 }, e.crashBound(owners, victim), deadline)
	time.Sleep(time.Until(deadline))
	e.checkStayed(r, ws, stayed, t0)
	e.checkRoutes(ctx, r, via, ds, stayed)
	e.checkFinal(r, ws, ds, stayed)
	e.checkActivity(ctx, r, via, ws, stayed)
	r.Notes = append(r.Notes, fmt.Sprintf("%d devices connected elsewhere kept their declared activity across the failover, %d of them with their lease or view re-created", len(stayed), moved))

	// The new owners pass on what is declared next.
	for i, d := range stayed {
		if err := d.declare(rctx, activities[(i+r.Index+1)%len(activities)], idleAfter/3); err != nil {
			return err
		}
	}
	seen(ws, stayed, within)
	e.checkActivity(ctx, r, via, ws, stayed)
	return nil
}

// declare has d declare a (set_activity); a declared active is declared
// again every renew until ctx ends or d declares something else, as the
// SDK renews it.
func (d *Device) declare(ctx context.Context, a messages.Activity, renew time.Duration) error {
	d.mu.Lock()
	c := d.conn
	if d.renew != nil {
		d.renew()
	}
	rctx, stop := context.WithCancel(ctx)
	d.activity, d.renew = a, stop
	d.mu.Unlock()
	if err := c.SetActivity(ctx, a); err != nil {
		return fmt.Errorf("chaos: %s declares %v: %w", d.User, a, err)
	}
	if a == messages.Activity_active {
		go func() {
			t := time.NewTicker(renew)
			defer t.Stop()
			for {
				select {
				case <-rctx.Done():
					return
				case <-t.C:
					if c.SetActivity(ctx, a) != nil { // closed: nothing to renew
						return
					}
				}
			}
		}()
	}
	return nil
}

// Activity is what d last declared.
func (d *Device) Activity() messages.Activity {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.activity
}

// shows reports whether ev shows d online on its one platform with the
// activity it declared.
func shows(ev Event, d *Device) bool {
	return ev.Status == messages.Status_online && slices.Equal(ev.Activities, []messages.Activity{d.Activity()})
}

// awaitActivity waits until every watcher of ws last holds each device of
// ds with its declared activity, or records what it holds at deadline.
func (e *Env) awaitActivity(r *Round, ws []*Watcher, ds []*Device, deadline time.Time) {
	for _, w := range ws {
		for _, d := range ds {
			for {
				ev, _ := w.Last(d.User)
				if shows(ev, d) {
					break
				}
				if time.Now().After(deadline) {
					r.find("activity_not_seen", d.User, w.User, fmt.Sprintf("holds %v %v, %s declared %v", ev.Status, ev.Activities, d.User, d.Activity()))
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
		}
	}
}

// checkActivity: the route (asked of via) and what each watcher of ws
// holds last show every device of ds with the activity it declared.
func (e *Env) checkActivity(ctx context.Context, r *Round, via *Node, ws []*Watcher, ds []*Device) {
	for _, d := range ds {
		devs, err := via.RouteDevices(ctx, d.User)
		if err != nil {
			r.find("unknown_route", d.User, "", err.Error())
		} else if len(devs) != 1 || devs[0].Activity != d.Activity().String() {
			r.find("activity_lost", d.User, "", fmt.Sprintf("route %+v, declared %v", devs, d.Activity()))
		}
		for _, w := range ws {
			if ev, _ := w.Last(d.User); !shows(ev, d) {
				r.find("activity_lost", d.User, w.User, fmt.Sprintf("holds %v %v at version %d, declared %v", ev.Status, ev.Activities, ev.Version, d.Activity()))
			}
		}
	}
}
