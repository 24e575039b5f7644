package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Lease is the split-brain resolver's arbiter (cluster.LeaseArbiter): one
// named row every node reaches, held by one node at a time until Expiry.
// Token grows by one each time the lease changes holder (a fencing token:
// whoever acts on the lease can tell a newer holder from an older one).
type Lease struct {
	Name   string
	Holder string
	Token  uint64
	Expiry time.Time
}

// Valid reports whether the lease is held at now.
func (l Lease) Valid(now time.Time) bool { return l.Holder != "" && now.Before(l.Expiry) }

// LeaseStore takes and renews leases with compare-and-set.
type LeaseStore interface {
	// TakeLease gives name to holder until now+ttl if it is free, expired
	// at now, or already holder's (a renewal, same token); otherwise it
	// changes nothing. It returns the lease as it stands afterwards:
	// Holder says who won. now is the caller's clock: nodes sharing a
	// lease keep their clocks within a small part of ttl of each other
	// (cluster.MaxClockSkew), which LeaseClock lets them check.
	TakeLease(ctx context.Context, name, holder string, now time.Time, ttl time.Duration) (Lease, error)
	// LeaseClock is the store's own clock.
	LeaseClock(ctx context.Context) (time.Time, error)
}

// ErrBadLease: an empty name or holder, or a ttl that is not positive.
var ErrBadLease = errors.New("store: bad lease request")

// CheckLease validates a TakeLease request.
func CheckLease(name, holder string, ttl time.Duration) error {
	if name == "" || holder == "" || ttl <= 0 {
		return fmt.Errorf("%w: name %q, holder %q, ttl %v", ErrBadLease, name, holder, ttl)
	}
	return nil
}

// MemoryLeases is a LeaseStore in this process (tests, and single-node
// runs, which never split).
type MemoryLeases struct {
	// Clock is the store's clock (LeaseClock); nil: time.Now. Tests set it
	// to put the store's clock off the nodes'.
	Clock func() time.Time

	mu     sync.Mutex
	leases map[string]Lease
}

func NewMemoryLeases() *MemoryLeases { return &MemoryLeases{leases: map[string]Lease{}} }

func (m *MemoryLeases) LeaseClock(context.Context) (time.Time, error) {
	if m.Clock != nil {
		return m.Clock(), nil
	}
	return time.Now(), nil
}

func (m *MemoryLeases) TakeLease(_ context.Context, name, holder string, now time.Time, ttl time.Duration) (Lease, error) {
	if err := CheckLease(name, holder, ttl); err != nil {
		return Lease{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	l := m.leases[name]
	switch {
	case l.Holder == holder:
	case !l.Valid(now):
		l.Holder, l.Token = holder, l.Token+1
	default:
		return l, nil
	}
	l.Name, l.Expiry = name, now.Add(ttl)
	m.leases[name] = l
	return l, nil
}
