package webhook

import (
	"context"
	"encoding/json"
	"time"

	"github.com/presence-im/presence/store"
)

// sweepLoop looks every Sweep for rows whose owner is gone and claims
// those of users whose view this node owns now, then checks the rows it
// claimed against the users' views: the new owner delivers what a dead
// node left, and tells the receiver of a change the dead node published
// but had not written. From its first sweep on it also checks the rows it
// owned before it started (a restart under the same name), a page a
// sweep. It also counts the rows waiting that this node owns.
func (h *Hooks) sweepLoop() {
	t := time.NewTicker(h.cfg.Limits.Sweep)
	defer t.Stop()
	own := make([]ownCursor, len(h.eps))
	for {
		select {
		case <-h.ctx.Done():
			return
		case <-t.C:
		}
		for i, ep := range h.eps {
			h.own(ep, &own[i])
			h.sweep(ep)
			h.check(ep)
		}
	}
}

// sweepPage bounds the rows read at once, and the rows waiting to be
// checked; the next sweep takes more.
const sweepPage = 1000

// room is how many more rows the endpoint's check queue takes.
func (h *Hooks) room(ep *endpoint) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return sweepPage - len(h.recheck[ep])
}

func (h *Hooks) sweep(ep *endpoint) {
	ctx, cancel := context.WithTimeout(h.ctx, h.cfg.Limits.Timeout)
	defer cancel()
	if n, err := h.cfg.Store.CountHooks(ctx, ep.key, h.cfg.Node); err == nil {
		h.m.waiting.WithLabelValues(ep.label).Set(float64(n))
	}
	room := h.room(ep)
	if room <= 0 {
		return
	}
	orphans, err := h.cfg.Store.OrphanHooks(ctx, ep.key, h.cfg.Alive(), sweepPage)
	if err != nil {
		h.m.storeErrors.Inc()
		return
	}
	byOwner := map[string][]store.HookRow{}
	for _, r := range orphans {
		if room > 0 && h.cfg.Owns(r.User) {
			byOwner[r.Owner] = append(byOwner[r.Owner], r)
			room--
		}
	}
	claimed := 0
	for from, rows := range byOwner {
		users := make([]string, len(rows))
		for i, r := range rows {
			users[i] = r.User
		}
		if err := h.cfg.Store.ClaimHooks(ctx, ep.key, from, h.cfg.Node, users); err != nil {
			h.m.storeErrors.Inc()
			continue
		}
		claimed += len(users)
		h.toCheck(ep, rows)
	}
	if claimed > 0 {
		h.m.claimed.WithLabelValues(ep.label).Add(float64(claimed))
		h.cfg.Log.Info("webhook: claimed the undelivered changes of a node gone", "endpoint", ep.label, "users", claimed)
		ep.storeHas()
	}
}

// ownCursor is how far the check of this node's rows from before it
// started has gone: the last user read, or done.
type ownCursor struct {
	after string
	done  bool
}

// own queues a page of this node's own rows from before it started for a
// check, as far as the check queue has room.
func (h *Hooks) own(ep *endpoint, cur *ownCursor) {
	room := h.room(ep)
	if cur.done || room <= 0 {
		return
	}
	ctx, cancel := context.WithTimeout(h.ctx, h.cfg.Limits.Timeout)
	defer cancel()
	rows, err := h.cfg.Store.OwnedHooks(ctx, ep.key, h.cfg.Node, cur.after, room)
	if err != nil {
		h.m.storeErrors.Inc()
		return
	}
	var before []store.HookRow
	for _, r := range rows {
		if r.AtMs < h.started.UnixMilli() { // not this incarnation's
			before = append(before, r)
		}
	}
	h.toCheck(ep, before)
	if len(rows) < room {
		cur.done = true
		return
	}
	cur.after = rows[len(rows)-1].User
}

func (h *Hooks) toCheck(ep *endpoint, rows []store.HookRow) {
	h.mu.Lock()
	defer h.mu.Unlock()
	m := h.recheck[ep]
	if m == nil {
		m = map[string]store.HookRow{}
		h.recheck[ep] = m
	}
	for _, r := range rows {
		m[r.User] = r
	}
}

// check asks each queued user's view for its state, its version raised
// first above the row's and the wall time, and where the state differs
// from the row's (what the receiver has or will have) tells the receiver
// the view's, at the view's version: above the row's and anything an
// earlier incarnation of the view published, below its next change.
// A view still settling after the membership change is asked again at
// the next sweep.
func (h *Hooks) check(ep *endpoint) {
	h.mu.Lock()
	rows := h.recheck[ep]
	delete(h.recheck, ep)
	h.mu.Unlock()
	var later []store.HookRow
	for user, r := range rows {
		ctx, cancel := context.WithTimeout(h.ctx, h.cfg.Limits.Timeout)
		st, err := h.cfg.Query(ctx, user, r.Version+1)
		cancel()
		if err != nil || st.GetSettling() {
			later = append(later, r)
			continue
		}
		ev := eventOf(st, time.Now())
		var was Event
		_ = json.Unmarshal(r.Body, &was)
		if ev.Sig() == was.Sig() {
			continue
		}
		ev.Version = max(ev.Version, r.Version+1)
		if ev.Status == "offline" && was.Status == "online" {
			ev.Reason = "owner_crash" // its departure went with the dead node
		}
		h.m.rechecked.WithLabelValues(ep.label).Inc()
		h.Changed(ev)
	}
	if len(later) > 0 {
		h.toCheck(ep, later)
	}
}

// State is one endpoint's delivery as this node sees it (the dashboard,
// GET /api/webhooks).
type State struct {
	Endpoint  string  `json:"endpoint"`
	State     string  `json:"state"` // ok, retrying (5xx, 429, timeouts), failing (refused: 4xx)
	LastError string  `json:"last_error,omitempty"`
	Waiting   int     `json:"waiting"`  // rows in the store not yet delivered, every node's
	Backlog   int     `json:"backlog"`  // changes this node holds in memory for the endpoint, not yet sent
	OldestS   float64 `json:"oldest_s"` // this node's oldest undelivered change, seconds
}

// States are the endpoints' states.
func (h *Hooks) States(ctx context.Context) []State {
	var out []State
	for _, ep := range h.eps {
		n, _ := h.cfg.Store.CountHooks(ctx, ep.key, "")
		out = append(out, State{Endpoint: ep.label, State: ep.state.Load().(string), LastError: ep.last.Load().(string), Waiting: n,
			Backlog: ep.backlogLen(), OldestS: ep.oldestAge().Seconds()})
	}
	return out
}
