package actors

import (
	"container/heap"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// timer is one pending self-message; arming it again cancels the previous
// one. A cancelled timer's message can still arrive (it may be on its way
// when cancelled), so every timer message carries a generation that its
// handler checks. A timer belongs to one actor and is used from its
// Receive only.
type timer struct{ e *timerEntry }

func (t *timer) arm(s *timers, d time.Duration, self *actor.PID, msg any) { s.arm(t, d, self, msg) }

func (t *timer) stop() {
	if t.e != nil {
		t.e.s.stop(t)
	}
}

// timers runs the timers of a node's actors (lease expiries, renewals,
// debounces, idle checks) from one heap ordered by due time, on one
// goroutine with one runtime timer. An armed timer is one small entry,
// reused when it is armed again, where a time.AfterFunc behind
// proto.actor's SendOnce was one runtime timer and its closures per arm,
// and a device keeps two or three armed (BENCHMARKS.md, "RSS and heap per
// device", has the sizes).
// Safe for concurrent use; stop ends the goroutine.
type timers struct {
	root *actor.RootContext

	mu   sync.Mutex
	h    timerHeap
	wake *time.Timer // reset to the earliest entry's due time
	due  []timerMsg  // popped under mu, sent outside it; the run loop's own

	quit, done chan struct{}
}

type timerEntry struct {
	s   *timers
	at  time.Time
	pid *actor.PID
	msg any
	i   int // index in the heap; -1: not in it
}

type timerMsg struct {
	pid *actor.PID
	msg any
}

func newTimers(root *actor.RootContext) *timers {
	s := &timers{root: root, wake: time.NewTimer(time.Hour), quit: make(chan struct{}), done: make(chan struct{})}
	s.wake.Stop()
	go s.run()
	return s
}

func (s *timers) arm(t *timer, d time.Duration, self *actor.PID, msg any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := t.e
	if e == nil {
		e = &timerEntry{s: s, i: -1}
		t.e = e
	}
	e.at, e.pid, e.msg = time.Now().Add(max(d, 0)), self, msg
	if e.i >= 0 {
		heap.Fix(&s.h, e.i)
	} else {
		heap.Push(&s.h, e)
	}
	if s.h[0] == e {
		s.wake.Reset(max(d, 0))
	}
}

// stop takes the timer's entry out of the heap and lets it go: a stopped
// actor's timers hold nothing.
func (s *timers) stop(t *timer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t.e.i >= 0 {
		heap.Remove(&s.h, t.e.i)
	}
	t.e = nil
}

func (s *timers) run() {
	defer close(s.done)
	for {
		select {
		case <-s.quit:
			return
		case <-s.wake.C:
		}
		now := time.Now()
		s.mu.Lock()
		for len(s.h) > 0 && !s.h[0].at.After(now) {
			e := heap.Pop(&s.h).(*timerEntry)
			s.due = append(s.due, timerMsg{e.pid, e.msg})
			e.msg = nil
		}
		if len(s.h) > 0 {
			s.wake.Reset(s.h[0].at.Sub(now))
		}
		due := s.due
		s.mu.Unlock()
		for i, m := range due {
			s.root.Send(m.pid, m.msg)
			due[i] = timerMsg{}
		}
		s.due = due[:0] // only this goroutine appends to it
		if cap(due) > 1024 {
			s.due = nil // a burst's slice goes with it
		}
	}
}

// stopAll ends the goroutine; timers armed later never fire.
func (s *timers) stopAll() {
	close(s.quit)
	<-s.done
}

// timerHeap orders entries by due time (container/heap).
type timerHeap []*timerEntry

func (h timerHeap) Len() int           { return len(h) }
func (h timerHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h timerHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].i, h[j].i = i, j
}
func (h *timerHeap) Push(x any) {
	e := x.(*timerEntry)
	e.i = len(*h)
	*h = append(*h, e)
}
func (h *timerHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = nil
	e.i = -1
	*h = old[:len(old)-1]
	if c := cap(old); c > 1024 && len(*h) < c/4 { // after a peak: memory follows the live timers
		*h = append(make(timerHeap, 0, c/2), *h...)
	}
	return e
}

// Timer messages: local only, never serialized.
type (
	leaseExpire   struct{ gen uint64 }
	idleCheck     struct{ gen uint64 }
	debounceFired struct{ gen uint64 }
	ageView       struct{}
	renewDue      struct{}
	checkTick     struct{}
	settleView    struct{}
	// tokenExpired tells a connection its credential expired
	// (OpenRequest.Expires): it closes its socket.
	tokenExpired struct{}
	// topologyChanged tells a gateway that members came or went, so its
	// connections re-register (identities may have moved); reregister is
	// what it tells each connection, reregisterDue the connection's
	// jittered timer.
	topologyChanged struct{}
	reregister      struct{}
	reregisterDue   struct{ gen uint64 }
	// reregistered is the lease's answer to a re-register (or the error
	// of the request), back at the connection that sent it.
	reregistered struct {
		gen uint64
		res any
		err error
	}
)
