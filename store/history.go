package store

import (
	"context"
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
