package actors

import (
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// recorder is an actor that records each message with the virtual time
// since start it arrived at.
type recorder struct {
	start time.Time
	mu    sync.Mutex
	got   []fired
}

type fired struct {
	at time.Duration
	m  string
}

func (r *recorder) Receive(ctx actor.Context) {
	if m, ok := ctx.Message().(string); ok {
		r.mu.Lock()
		r.got = append(r.got, fired{time.Since(r.start), m})
		r.mu.Unlock()
	}
}

func (r *recorder) all() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, f := range r.got {
		out = append(out, fmt.Sprintf("%v %s", f.at, f.m))
	}
	return out
}

func quietSystem() *actor.ActorSystem {
	return actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}))
}

// timerRig is a node's timers and a recorder for their messages, stopped
// when the test ends.
func timerRig(t *testing.T) (*timers, *recorder, *actor.PID) {
	sys := quietSystem()
	s := newTimers(sys.Root)
	r := &recorder{start: time.Now()}
	pid := sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return r }))
	t.Cleanup(func() {
		sys.Root.Stop(pid)
		s.stopAll()
	})
	return s, r, pid
}

// The node's timers deliver each armed message once, at its due time, in
// due order whatever the order they were armed in; arming again moves a
// timer (its earlier message never comes), stopping one drops it and lets
// its entry go.
func TestTimersFireOnceAtTheirTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, r, pid := timerRig(t)
		var a, b, c, d timer
		a.arm(s, 3*time.Second, pid, "a")
		b.arm(s, time.Second, pid, "b")
		c.arm(s, 2*time.Second, pid, "c")
		d.arm(s, 4*time.Second, pid, "d")
		d.arm(s, 500*time.Millisecond, pid, "d again") // earlier
		c.arm(s, 5*time.Second, pid, "c again")        // later
		b.stop()
		if b.e != nil {
			t.Fatal("a stopped timer keeps its entry")
		}
		time.Sleep(10 * time.Second)
		synctest.Wait()
		want := []string{"500ms d again", "3s a", "5s c again"}
		if got := r.all(); !slices.Equal(got, want) {
			t.Fatalf("messages %v, want %v", got, want)
		}
		if len(s.h) != 0 {
			t.Fatalf("%d entries left in the heap after every timer fired", len(s.h))
		}
	})
}

// Many timers armed, re-armed and stopped at random over virtual time:
// each message fires once, exactly when it was due, unless its timer was
// armed again or stopped before then, when it never does.
func TestTimersManyAtRandom(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	synctest.Test(t, func(t *testing.T) {
		s, r, pid := timerRig(t)
		ts := make([]timer, 500)
		armed := make([]string, len(ts))  // the message each timer was last armed with
		due := map[string]time.Duration{} // every message armed, when due
		cancelled := map[string]bool{}    // moved or stopped before it was due
		cancel := func(i int) {
			if m := armed[i]; m != "" && due[m] > time.Since(r.start) {
				cancelled[m] = true
			}
			armed[i] = ""
		}
		for step := range 5000 {
			i := rng.IntN(len(ts))
			cancel(i)
			if rng.IntN(4) == 0 {
				ts[i].stop()
			} else {
				m := fmt.Sprintf("t%d-%d", i, step)
				d := time.Duration(1+rng.IntN(3000)) * time.Millisecond
				armed[i], due[m] = m, time.Since(r.start)+d
				ts[i].arm(s, d, pid, m)
			}
			if step%20 == 0 {
				time.Sleep(time.Duration(rng.IntN(100)) * time.Millisecond)
				synctest.Wait()
			}
		}
		time.Sleep(4 * time.Second)
		synctest.Wait()
		r.mu.Lock()
		defer r.mu.Unlock()
		seen := map[string]bool{}
		for _, f := range r.got {
			switch {
			case seen[f.m]:
				t.Fatalf("%s fired twice", f.m)
			case cancelled[f.m]:
				t.Fatalf("%s fired at %v, though moved or stopped before its time %v", f.m, f.at, due[f.m])
			case f.at != due[f.m]:
				t.Fatalf("%s fired at %v, due at %v", f.m, f.at, due[f.m])
			}
			seen[f.m] = true
		}
		for m := range due {
			if !seen[m] && !cancelled[m] {
				t.Fatalf("%s (due at %v) never fired", m, due[m])
			}
		}
		if len(s.h) != 0 {
			t.Fatalf("%d entries left in the heap after every timer fired", len(s.h))
		}
		t.Logf("%d messages armed, %d fired, %d cancelled", len(due), len(seen), len(cancelled))
	})
}

// After a burst of timers has fired, the heap gives back the room it grew
// to: memory follows the timers armed, not the peak.
func TestTimersShrinkAfterABurst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, r, pid := timerRig(t)
		ts := make([]timer, 5000)
		for i := range ts {
			ts[i].arm(s, time.Duration(1+i%100)*time.Millisecond, pid, "burst")
		}
		s.mu.Lock()
		peak := cap(s.h)
		s.mu.Unlock()
		time.Sleep(time.Second)
		synctest.Wait()
		if n := len(r.all()); n != len(ts) {
			t.Fatalf("%d of %d messages", n, len(ts))
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		if len(s.h) != 0 || cap(s.h) > 2048 || cap(s.due) > 1024 {
			t.Fatalf("after the burst: %d entries, heap room %d (peak %d), due room %d: want at most 2048 and 1024", len(s.h), cap(s.h), peak, cap(s.due))
		}
	})
}
