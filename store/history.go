package store

import (
	"context"
	"fmt"
	"time"
)

// HistoryStore keeps what a passivated or re-created actor must not forget:
// each device's attempt floor (so a late, older handshake is still refused)
// and each user's last departure (the last-seen minute).
type HistoryStore interface {
	Floor(ctx context.Context, user, device string) (uint64, error)
	// RaiseFloor sets the floor to attempt if that is higher.
	RaiseFloor(ctx context.Context, user, device string, attempt uint64) error
	LastSeen(ctx context.Context, user string) (time.Time, error)
	// SetLastSeen sets the last departure if t is later.
	SetLastSeen(ctx context.Context, user string, t time.Time) error
}

// FloorTaker is a HistoryStore that can read a floor and raise it in one
// write: a handshake's lease, activated cold, would otherwise read the
// floor and then write its attempt, two trips to the store per connect.
type FloorTaker interface {
	// TakeFloor makes attempt the floor if it is above the stored one,
	// durably before it returns, and otherwise says the floor that stands.
	TakeFloor(ctx context.Context, user, device string, attempt uint64) (Taken, error)
}

// TakeFloor makes attempt user/device's floor if it is above the stored
// one (FloorTaker), or, on a store that cannot (the memory store), reads
// the floor and raises it: the same answer in two trips.
func TakeFloor(ctx context.Context, h HistoryStore, user, device string, attempt uint64) (Taken, error) {
	if t, ok := h.(FloorTaker); ok {
		return t.TakeFloor(ctx, user, device, attempt)
	}
	return takeInTwo(ctx, h, user, device, attempt)
}

// takeInTwo is TakeFloor as a read and then a raise.
func takeInTwo(ctx context.Context, h HistoryStore, user, device string, attempt uint64) (Taken, error) {
	if err := CheckAttempt(user, device, attempt); err != nil {
		return Taken{}, err
	}
	floor, err := h.Floor(ctx, user, device)
	if err != nil {
		return Taken{}, err
	}
	if attempt <= floor {
		return Taken{Floor: floor}, nil
	}
	if err := h.RaiseFloor(ctx, user, device, attempt); err != nil {
		return Taken{}, err
	}
	return Taken{OK: true}, nil
}

// LastSeenKeeper is a HistoryStore whose writer keeps last seens and
// writes them itself (Batcher): KeepLastSeen hands one over and returns
// before its commit, ErrClosed once the store is closed.
type LastSeenKeeper interface {
	KeepLastSeen(user string, t time.Time) error
}

// KeepLastSeen hands a departure's last seen to h's writer without waiting
// for the store (LastSeenKeeper), or sets it when h has none (a memory
// store: at once). The writer keeps the latest per user and writes it once
// the store answers.
func KeepLastSeen(ctx context.Context, h HistoryStore, user string, t time.Time) error {
	if k, ok := h.(LastSeenKeeper); ok {
		return k.KeepLastSeen(user, t)
	}
	return h.SetLastSeen(ctx, user, t)
}

// ReadFloor is what a SQL store answers for a floor it read as n (a
// signed column), err being the read's error and none whether the row was
// missing (floor 0).
func ReadFloor(user, device string, n int64, none bool, err error) (uint64, error) {
	switch {
	case none:
		return 0, nil
	case err != nil:
		return 0, fmt.Errorf("store: floor of %s/%s: %w", user, device, err)
	}
	return uint64(n), nil
}

// CheckAttempt refuses an attempt a SQL store's signed column cannot hold.
func CheckAttempt(user, device string, attempt uint64) error {
	if attempt > 1<<63-1 {
		return fmt.Errorf("store: floor of %s/%s: attempt %d out of range", user, device, attempt)
	}
	return nil
}

// ReadLastSeen is what a SQL store answers for a last seen it read as ms
// (Unix milliseconds), err being the read's error and none whether the row
// was missing (zero time: never seen).
func ReadLastSeen(user string, ms int64, none bool, err error) (time.Time, error) {
	switch {
	case none:
		return time.Time{}, nil
	case err != nil:
		return time.Time{}, fmt.Errorf("store: last seen of %s: %w", user, err)
	}
	return time.UnixMilli(ms), nil
}
