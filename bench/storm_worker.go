package bench

import (
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/presence-im/presence/core"
	"github.com/presence-im/presence/messages"
)

// stormState is a load process's side of the storm bench: each device's
// contacts (the users after it, R realtime and B batched), what it holds
// of each, and what it was sent from the wave on.
type stormState struct {
	mu       sync.Mutex
	n, r, b  int
	tiered   bool
	waveNs   int64   // when the wave's devices closed (the orchestrator's clock: the same host)
	frac     float64 // the share of each process's devices that left
	devs     map[*wconn]*stormDev
	frames   map[string]int64 // by kind (frameKind), every frame but heartbeat acks received from the wave on
	presence int64            // presences those frames carried
	// lastBatchedNs is when a batched contact's held status last changed,
	// by any path (batch, query answer, snapshot).
	lastBatchedNs int64
	// regressions are presences received with a version below the one the
	// device holds for their target: the wire's versions, before any filter.
	regressions         int64
	offlineLatenciesMic []int64 // realtime offlines of departed users: receive minus the wave
}

// stormDev is one device as the SDKs keep it (client/session.go,
// client/degraded.go): the presence held per contact, the contacts the
// node degraded to pull and the loop pulling them, and those the restored
// snapshot replaces.
type stormDev struct {
	u         int
	batched   map[string]bool // its batched contacts
	held      map[string]*messages.Presence
	pulling   map[string]bool
	restoring []string
	stopPull  context.CancelFunc
	notBefore time.Time // a 429's wait
	queries   int       // request ids q1, q2, ...
}

// The frame kinds of the storm's frames rows.
const (
	kindPresence  = "presence"
	kindBatch     = "presence_batch"
	kindSnapshot  = "snapshot"          // a subscribe's answer
	kindQuery     = "query_answer"      // a snapshot answering a query
	kindRestSnap  = "restored_snapshot" // the snapshot after restored
	kindDegraded  = "degraded"
	kindRestored  = "restored"
	kindError     = "error"
	kindOther     = "other"
	queryIDPrefix = "q"
)

// stormKinds orders the kinds in the table.
var stormKinds = []string{kindPresence, kindBatch, kindSnapshot, kindQuery, kindRestSnap, kindDegraded, kindRestored, kindError, kindOther}

// frameKind names f for the frames rows; "" for a heartbeat ack (not
// counted: the same in every mode).
func frameKind(f *messages.Frame) string {
	switch k := f.GetKind().(type) {
	case *messages.Frame_HeartbeatAck:
		return ""
	case *messages.Frame_Presence:
		return kindPresence
	case *messages.Frame_PresenceBatch:
		return kindBatch
	case *messages.Frame_Snapshot:
		switch id := k.Snapshot.GetRequestId(); {
		case id == core.RestoredID:
			return kindRestSnap
		case strings.HasPrefix(id, queryIDPrefix):
			return kindQuery
		}
		return kindSnapshot
	case *messages.Frame_Degraded:
		return kindDegraded
	case *messages.Frame_Restored:
		return kindRestored
	case *messages.Frame_Error:
		return kindError
	}
	return kindOther
}

// contactsOf is user u's realtime and batched contacts among n users.
func (s *stormState) contactsOf(u int) (rt, bt []string) {
	for k := 1; k <= s.r+s.b; k++ {
		t := fmt.Sprintf("bench%06d", (u+k)%s.n)
		if k <= s.r {
			rt = append(rt, t)
		} else {
			bt = append(bt, t)
		}
	}
	return rt, bt
}

// departed reports whether user u left in the wave: a share frac of the
// users, spread over them (so that a departed user's subscribers are
// mostly ones that stayed, as in a real wave).
func departed(u int, frac float64) bool { return float64((u*7919)%1000) < frac*1000 }

// subscribeContacts subscribes wc to its user's contacts and waits for the
// two snapshots.
func (w *worker) subscribeContacts(ctx context.Context, wc *wconn, u int) bool {
	s := w.storm.Load()
	rt, bt := s.contactsOf(u)
	tier := messages.Tier_realtime
	if s.tiered {
		tier = messages.Tier_batched
	}
	s.mu.Lock()
	s.devs[wc] = &stormDev{u: u, batched: setOf(bt), held: map[string]*messages.Presence{}}
	s.mu.Unlock()
	_ = wc.c.SubscribeTier(ctx, "r", messages.Tier_realtime, rt...)
	_ = wc.c.SubscribeTier(ctx, "b", tier, bt...)
	for range 2 {
		select {
		case <-wc.snap:
		case <-time.After(60 * time.Second):
			w.noteErr(wc.user + ": no snapshot within 60 s of subscribing")
			return false
		}
	}
	return true
}

func setOf(xs []string) map[string]bool {
	m := make(map[string]bool, len(xs))
	for _, x := range xs {
		m[x] = true
	}
	return m
}

// stormFrame records one frame of a storm device and acts on it as the
// SDKs do.
func (w *worker) stormFrame(ctx context.Context, wc *wconn, f *messages.Frame, at time.Time) {
	s := w.storm.Load()
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	d := s.devs[wc]
	if d == nil {
		return
	}
	if kind := frameKind(f); kind != "" && s.waveNs != 0 && at.UnixNano() >= s.waveNs {
		s.frames[kind]++
		s.presence += int64(len(f.GetPresenceBatch().GetPresences()) + len(f.GetSnapshot().GetPresences()))
		if f.GetPresence() != nil {
			s.presence++
		}
	}
	switch k := f.GetKind().(type) {
	case *messages.Frame_Snapshot:
		s.snapshot(d, k.Snapshot, at)
	case *messages.Frame_Presence:
		s.change(d, k.Presence, at)
		s.offlineLatency(k.Presence, at)
	case *messages.Frame_PresenceBatch:
		for _, p := range k.PresenceBatch.GetPresences() {
			s.change(d, p, at)
		}
	case *messages.Frame_Degraded:
		w.degraded(ctx, wc, d, k.Degraded)
	case *messages.Frame_Restored:
		d.restoring = slices.Sorted(maps.Keys(d.pulling))
		d.stopPulling()
	case *messages.Frame_Error:
		if e := k.Error; strings.HasPrefix(e.GetRequestId(), queryIDPrefix) && e.GetRetryAfterMs() > 0 {
			d.notBefore = at.Add(time.Duration(e.GetRetryAfterMs()) * time.Millisecond)
		}
	}
}

// snapshot takes a snapshot as the SDKs do: a subscribe's and the
// restored one replace the state of their targets (one absent is not
// visible and forgotten; the restored one's are those pulled); a query's
// answer is taken as changes. s.mu held.
func (s *stormState) snapshot(d *stormDev, snap *messages.Snapshot, at time.Time) {
	var replaced []string
	switch id := snap.GetRequestId(); {
	case strings.HasPrefix(id, queryIDPrefix):
		for _, p := range snap.GetPresences() {
			s.change(d, p, at)
		}
		return
	case id == core.RestoredID:
		replaced, d.restoring = d.restoring, nil
	default:
		rt, bt := s.contactsOf(d.u)
		replaced = map[string][]string{"r": rt, "b": bt}[id]
	}
	got := map[string]bool{}
	for _, p := range snap.GetPresences() {
		got[p.GetUser()] = true
		s.keep(d, p, at, snap.GetRequestId() == core.RestoredID)
	}
	for _, t := range replaced {
		if !got[t] {
			delete(d.held, t)
		}
	}
}

// change keeps p if it is newer than what d holds of its target. s.mu held.
func (s *stormState) change(d *stormDev, p *messages.Presence, at time.Time) {
	if old := d.held[p.GetUser()]; old != nil && p.GetVersion() <= old.GetVersion() {
		if p.GetVersion() < old.GetVersion() {
			s.regressions++
		}
		return
	}
	s.keep(d, p, at, false)
}

// keep holds p for its target, noting a batched contact's status change
// and, for a restored snapshot (checked), a version going back. s.mu held.
func (s *stormState) keep(d *stormDev, p *messages.Presence, at time.Time, checked bool) {
	old := d.held[p.GetUser()]
	if checked && old != nil && p.GetVersion() < old.GetVersion() {
		s.regressions++
	}
	if d.batched[p.GetUser()] && (old == nil || old.GetStatus() != p.GetStatus()) {
		s.lastBatchedNs = max(s.lastBatchedNs, at.UnixNano())
	}
	d.held[p.GetUser()] = p
}

// offlineLatency records a departed user's offline reaching a realtime
// subscriber. s.mu held.
func (s *stormState) offlineLatency(p *messages.Presence, at time.Time) {
	u, _ := strconv.Atoi(strings.TrimPrefix(p.GetUser(), "bench"))
	if p.GetStatus() == messages.Status_offline && s.waveNs != 0 && departed(u, s.frac) {
		s.offlineLatenciesMic = append(s.offlineLatenciesMic, (at.UnixNano()-s.waveNs)/1000)
	}
}

// degraded starts pulling the targets the node stopped pushing, as the
// SDKs do: a query of them every retry_after_ms. s.mu held.
func (w *worker) degraded(ctx context.Context, wc *wconn, d *stormDev, m *messages.Degraded) {
	if d.pulling == nil {
		d.pulling = map[string]bool{}
	}
	for _, t := range m.GetTargets() {
		d.pulling[t] = true
	}
	if d.stopPull != nil {
		return
	}
	pace := max(time.Duration(m.GetRetryAfterMs())*time.Millisecond, 100*time.Millisecond)
	pctx, stop := context.WithCancel(ctx)
	d.stopPull = stop
	go w.pull(ctx, pctx, wc, pace)
}

// stopPulling ends d's pull loop; s.mu held.
func (d *stormDev) stopPulling() {
	if d.stopPull != nil {
		d.stopPull()
	}
	d.stopPull, d.pulling = nil, nil
}

// pull queries wc's degraded targets every pace (in chunks of
// core.MaxTargets), waiting out a 429, until pctx ends. It writes with
// ctx, the connection's: a write whose context ends closes the socket
// (coder/websocket), and pctx ends at restored.
func (w *worker) pull(ctx, pctx context.Context, wc *wconn, pace time.Duration) {
	t := time.NewTimer(pace)
	defer t.Stop()
	for {
		select {
		case <-pctx.Done():
			return
		case <-t.C:
		}
		s := w.storm.Load()
		s.mu.Lock()
		d := s.devs[wc]
		if d == nil {
			s.mu.Unlock()
			return
		}
		if wait := time.Until(d.notBefore); wait > 0 {
			s.mu.Unlock()
			t.Reset(wait)
			continue
		}
		var asks [][]string
		var ids []string
		for chunk := range slices.Chunk(slices.Sorted(maps.Keys(d.pulling)), core.MaxTargets) {
			d.queries++
			asks, ids = append(asks, chunk), append(ids, fmt.Sprintf("%s%d", queryIDPrefix, d.queries))
		}
		s.mu.Unlock()
		for i, targets := range asks {
			_ = wc.c.Query(ctx, ids[i], targets...)
		}
		t.Reset(pace)
	}
}

// stormCommand answers the storm bench's commands; false: not one.
//
//	contacts N R B TIERED   every device subscribes to its contacts -> "contacts K"
//	wave NS FRAC AWAY       FRAC of the devices (departed) close at once, then come back after AWAY
//	                        and subscribe again -> "waved BACK_NS MISSED" (MISSED: not back)
//	storm                   -> "storm LAST_BATCHED_NS WRONG REGRESSIONS PRESENCES KIND=N,... LAT_US,..."
//	                        (WRONG: contacts not held online, or not held)
//	truth FILE              -> "truth WRONG MISSING": contacts held otherwise than FILE's
//	                        "USER STATUS" lines (the nodes' own answer), or not held
func (w *worker) stormCommand(ctx context.Context, cmd []string) bool {
	switch cmd[0] {
	case "contacts":
		n, _ := strconv.Atoi(cmd[1])
		r, _ := strconv.Atoi(cmd[2])
		b, _ := strconv.Atoi(cmd[3])
		w.storm.Store(&stormState{n: n, r: r, b: b, tiered: cmd[4] == "1", devs: map[*wconn]*stormDev{}, frames: map[string]int64{}})
		w.say("contacts %d", w.eachStorm(ctx, w.o.Count, nil))
	case "wave":
		w.wave(ctx, cmd)
	case "storm":
		w.say("storm %s", w.stormLine())
	case "truth":
		w.say("truth %s", w.truthLine(cmd[1]))
	default:
		return false
	}
	return true
}

// eachStorm subscribes the first k devices (re-dialing those in redial
// first), or with redial only those, to their contacts, 50 at a time; it
// returns those subscribed.
func (w *worker) eachStorm(ctx context.Context, k int, redial map[int]bool) int {
	var mu sync.Mutex
	done := 0
	sem := make(chan struct{}, 50)
	var wg sync.WaitGroup
	for i := range k {
		if redial != nil && !redial[i] {
			continue
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			u := w.o.First + i
			w.mu.Lock()
			wc := w.conns[i]
			w.mu.Unlock()
			if redial[i] {
				var err error
				if wc, err = w.dial(ctx, fmt.Sprintf("bench%06d", u)); err != nil {
					return
				}
				w.mu.Lock()
				w.conns[i] = wc
				w.mu.Unlock()
			}
			if wc != nil && w.subscribeContacts(ctx, wc, u) {
				mu.Lock()
				done++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return done
}

// wave closes the first FRAC of the devices cleanly at NS (already past:
// at once), waits AWAY, and brings them back.
func (w *worker) wave(ctx context.Context, cmd []string) {
	ns, _ := strconv.ParseInt(cmd[1], 10, 64)
	frac, _ := strconv.ParseFloat(cmd[2], 64)
	away, _ := time.ParseDuration(cmd[3])
	s := w.storm.Load()
	s.mu.Lock()
	s.waveNs, s.frac = ns, frac
	s.mu.Unlock()
	redial := map[int]bool{}
	w.mu.Lock()
	conns := slices.Clone(w.conns)
	w.mu.Unlock()
	for i, wc := range conns {
		if !departed(w.o.First+i, frac) {
			continue
		}
		redial[i] = true
		if wc == nil {
			continue
		}
		wc.closing.Store(true)
		s.forget(wc)
		go func() { _ = wc.c.Close() }()
	}
	time.Sleep(time.Until(time.Unix(0, ns).Add(away)))
	back := w.eachStorm(ctx, w.o.Count, redial)
	w.say("waved %d %d", time.Now().UnixNano(), len(redial)-back)
}

// forget drops a device that ends, and its pull loop.
func (s *stormState) forget(wc *wconn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if d := s.devs[wc]; d != nil {
		d.stopPulling()
		delete(s.devs, wc)
	}
}

// stormEnded stops the pull loop of a device whose connection ended (it
// keeps what it holds: the checks count it).
func (w *worker) stormEnded(wc *wconn) {
	if s := w.storm.Load(); s != nil {
		s.mu.Lock()
		if d := s.devs[wc]; d != nil {
			d.stopPulling()
		}
		s.mu.Unlock()
	}
}

// stormLine is what the devices were sent and how many of their contacts
// they do not hold online (every device is back by then).
func (w *worker) stormLine() string {
	s := w.storm.Load()
	s.mu.Lock()
	defer s.mu.Unlock()
	wrong, _ := s.wrong(func(string) messages.Status { return messages.Status_online })
	lats := make([]string, len(s.offlineLatenciesMic))
	for i, l := range s.offlineLatenciesMic {
		lats[i] = strconv.FormatInt(l, 10)
	}
	var kinds []string
	for _, k := range slices.Sorted(maps.Keys(s.frames)) {
		kinds = append(kinds, fmt.Sprintf("%s=%d", k, s.frames[k]))
	}
	return fmt.Sprintf("%d %d %d %d %s %s", s.lastBatchedNs, wrong, s.regressions, s.presence, strings.Join(append(kinds, ""), ","), strings.Join(append(lats, ""), ","))
}

// wrong counts the contacts, over every device, not held with the status
// truth gives, and among them those not held at all. s.mu held.
func (s *stormState) wrong(truth func(user string) messages.Status) (wrong, missing int) {
	for _, d := range s.devs {
		rt, bt := s.contactsOf(d.u)
		for _, t := range append(rt, bt...) {
			p := d.held[t]
			if p == nil {
				missing++
			}
			if p == nil || p.GetStatus() != truth(t) {
				wrong++
			}
		}
	}
	return wrong, missing
}

// truthLine compares what the devices hold with the truth in file (lines
// "USER STATUS", as the nodes answer lookups): "WRONG MISSING".
func (w *worker) truthLine(file string) string {
	b, err := os.ReadFile(file)
	if err != nil {
		return "-1 -1 " + err.Error()
	}
	truth := map[string]messages.Status{}
	for _, l := range strings.Split(string(b), "\n") {
		if user, st, ok := strings.Cut(l, " "); ok {
			truth[user] = messages.Status(messages.Status_value[st])
		}
	}
	s := w.storm.Load()
	s.mu.Lock()
	defer s.mu.Unlock()
	wrong, missing := s.wrong(func(u string) messages.Status {
		if st, ok := truth[u]; ok {
			return st
		}
		return messages.Status_unknown
	})
	return fmt.Sprintf("%d %d", wrong, missing)
}
