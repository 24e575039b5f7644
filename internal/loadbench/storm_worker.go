package loadbench

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/presence-im/presence/messages"
)

// stormState is a load process's side of the storm bench: each device's
// contacts (the users after it, R realtime and B batched), what it last
// holds of each, and what it was sent during the wave.
type stormState struct {
	mu                  sync.Mutex
	n, r, b             int
	tiered              bool
	waveNs              int64   // when the wave's devices closed (the orchestrator's clock: the same host)
	frac                float64 // the share of each process's devices that left
	held                map[*wconn]map[string]messages.Status
	rtFrames, batches   int64
	batchPresences      int64
	lastBatchNs         int64
	offlineLatenciesMic []int64 // realtime offlines of departed users: receive minus the wave
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
	s.held[wc] = map[string]messages.Status{}
	s.mu.Unlock()
	_ = wc.c.SubscribeTier(ctx, "r", messages.Tier_realtime, rt...)
	_ = wc.c.SubscribeTier(ctx, "b", tier, bt...)
	for range 2 {
		select {
		case <-wc.snap:
		case <-time.After(60 * time.Second):
			return false
		}
	}
	return true
}

// stormFrame records one frame of a storm device.
func (w *worker) stormFrame(wc *wconn, f *messages.Frame, at time.Time) {
	s := w.storm.Load()
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	held := s.held[wc]
	if held == nil {
		return
	}
	keep := func(p *messages.Presence) { held[p.GetUser()] = p.GetStatus() }
	switch k := f.GetKind().(type) {
	case *messages.Frame_Snapshot:
		for _, p := range k.Snapshot.GetPresences() {
			keep(p)
		}
	case *messages.Frame_Presence:
		s.rtFrames++
		p := k.Presence
		keep(p)
		u, _ := strconv.Atoi(strings.TrimPrefix(p.GetUser(), "bench"))
		if p.GetStatus() == messages.Status_offline && s.waveNs != 0 && departed(u, s.frac) {
			s.offlineLatenciesMic = append(s.offlineLatenciesMic, (at.UnixNano()-s.waveNs)/1000)
		}
	case *messages.Frame_PresenceBatch:
		s.batches++
		s.batchPresences += int64(len(k.PresenceBatch.GetPresences()))
		s.lastBatchNs = max(s.lastBatchNs, at.UnixNano())
		for _, p := range k.PresenceBatch.GetPresences() {
			keep(p)
		}
	}
}

// stormCommand answers the storm bench's commands; false: not one.
//
//	contacts N R B TIERED            every device subscribes to its contacts -> "contacts K"
//	wave NS FRAC AWAY                 FRAC of the devices (departed) close at once, then come back after AWAY
//	                                  and subscribe again -> "waved BACK_NS"
//	storm                             -> "storm RT_FRAMES BATCHES BATCH_PRESENCES LAST_BATCH_NS WRONG LAT_US,..."
func (w *worker) stormCommand(ctx context.Context, cmd []string) bool {
	switch cmd[0] {
	case "contacts":
		n, _ := strconv.Atoi(cmd[1])
		r, _ := strconv.Atoi(cmd[2])
		b, _ := strconv.Atoi(cmd[3])
		w.storm.Store(&stormState{n: n, r: r, b: b, tiered: cmd[4] == "1", held: map[*wconn]map[string]messages.Status{}})
		w.say("contacts %d", w.eachStorm(ctx, w.o.Count, nil))
	case "wave":
		w.wave(ctx, cmd)
	case "storm":
		w.say("storm %s", w.stormLine())
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
		s.mu.Lock()
		delete(s.held, wc)
		s.mu.Unlock()
		go func() { _ = wc.c.Close() }()
	}
	time.Sleep(time.Until(time.Unix(0, ns).Add(away)))
	w.eachStorm(ctx, w.o.Count, redial)
	w.say("waved %d", time.Now().UnixNano())
}

// stormLine is what the devices were sent and how many of their contacts
// they do not hold online (every device is back by then).
func (w *worker) stormLine() string {
	s := w.storm.Load()
	s.mu.Lock()
	defer s.mu.Unlock()
	wrong := 0
	for _, held := range s.held {
		for _, st := range held {
			if st != messages.Status_online {
				wrong++
			}
		}
	}
	lats := make([]string, len(s.offlineLatenciesMic))
	for i, l := range s.offlineLatenciesMic {
		lats[i] = strconv.FormatInt(l, 10)
	}
	return fmt.Sprintf("%d %d %d %d %d %s", s.rtFrames, s.batches, s.batchPresences, s.lastBatchNs, wrong, strings.Join(append(lats, ""), ","))
}
