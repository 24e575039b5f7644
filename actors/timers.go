package actors

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/scheduler"
)

// timer is one pending self-message; arming it again cancels the previous
// one. A cancelled timer's message can still arrive, so every timer message
// carries a generation that its handler checks.
type timer struct {
	cancel scheduler.CancelFunc
}

func (t *timer) arm(s *scheduler.TimerScheduler, d time.Duration, self *actor.PID, msg any) {
	t.stop()
	t.cancel = s.SendOnce(max(d, 0), self, msg)
}

func (t *timer) stop() {
	if t.cancel != nil {
		t.cancel()
		t.cancel = nil
	}
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
