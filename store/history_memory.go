package store

import (
	"context"
	"sync"
	"time"
)

// MemoryHistory is a HistoryStore in maps.
type MemoryHistory struct {
	mu       sync.Mutex
	floors   map[[2]string]uint64
	lastSeen map[string]time.Time
}

// NewMemoryHistory returns an empty store.
func NewMemoryHistory() *MemoryHistory {
	return &MemoryHistory{floors: map[[2]string]uint64{}, lastSeen: map[string]time.Time{}}
}

func (s *MemoryHistory) Floor(_ context.Context, user, device string) (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.floors[[2]string{user, device}], nil
}

func (s *MemoryHistory) RaiseFloor(_ context.Context, user, device string, attempt uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := [2]string{user, device}
	s.floors[k] = max(s.floors[k], attempt)
	return nil
}

func (s *MemoryHistory) LastSeen(_ context.Context, user string) (time.Time, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastSeen[user], nil
}

func (s *MemoryHistory) SetLastSeen(_ context.Context, user string, t time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t.After(s.lastSeen[user]) {
		s.lastSeen[user] = t
	}
	return nil
}
