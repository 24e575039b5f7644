package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Arbiter is the split-brain arbiter of the lease strategy
// (--split-brain lease, cluster.Arbiter): one named row every node
// reaches, held by one node at a time until Expiry. Not a device's lease
// (core.Lease): this one decides which side of a split serves. Token grows
// by one each time the row changes holder (a fencing token: whoever acts
// on it can tell a newer holder from an older one).
type Arbiter struct {
	Name   string
	Holder string
	Token  uint64
	Expiry time.Time
}

// Valid reports whether the arbiter is held at now.
func (l Arbiter) Valid(now time.Time) bool { return l.Holder != "" && now.Before(l.Expiry) }

// ArbiterStore takes and renews arbiters with compare-and-set.
type ArbiterStore interface {
	// TakeArbiter gives name to holder until now+ttl if it is free, expired
	// at now, or already holder's (a renewal, same token); otherwise it
	// changes nothing. It returns the arbiter as it stands afterwards:
	// Holder says who won. now is the caller's clock: nodes sharing an
	// arbiter keep their clocks within a small part of ttl of each other
	// (cluster.MaxClockSkew), which ArbiterClock lets them check.
	TakeArbiter(ctx context.Context, name, holder string, now time.Time, ttl time.Duration) (Arbiter, error)
	// ArbiterClock is the store's own clock.
	ArbiterClock(ctx context.Context) (time.Time, error)
}

// ErrBadArbiter: an empty name or holder, or a ttl that is not positive.
var ErrBadArbiter = errors.New("store: bad arbiter request")

// CheckArbiter validates a TakeArbiter request.
func CheckArbiter(name, holder string, ttl time.Duration) error {
	if name == "" || holder == "" || ttl <= 0 {
		return fmt.Errorf("%w: name %q, holder %q, ttl %v", ErrBadArbiter, name, holder, ttl)
	}
	return nil
}

// MemoryArbiters is an ArbiterStore in this process (tests, and single-node
// runs, which never split).
type MemoryArbiters struct {
	// Clock is the store's clock (ArbiterClock); nil: time.Now. Tests set it
	// to put the store's clock off the nodes'.
	Clock func() time.Time

	mu   sync.Mutex
	rows map[string]Arbiter
}

func NewMemoryArbiters() *MemoryArbiters { return &MemoryArbiters{rows: map[string]Arbiter{}} }

func (m *MemoryArbiters) ArbiterClock(context.Context) (time.Time, error) {
	if m.Clock != nil {
		return m.Clock(), nil
	}
	return time.Now(), nil
}

func (m *MemoryArbiters) TakeArbiter(_ context.Context, name, holder string, now time.Time, ttl time.Duration) (Arbiter, error) {
	if err := CheckArbiter(name, holder, ttl); err != nil {
		return Arbiter{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	l := m.rows[name]
	switch {
	case l.Holder == holder:
	case !l.Valid(now):
		l.Holder, l.Token = holder, l.Token+1
	default:
		return l, nil
	}
	l.Name, l.Expiry = name, now.Add(ttl)
	m.rows[name] = l
	return l, nil
}
