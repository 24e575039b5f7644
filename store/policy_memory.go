package store

import (
	"context"
	"slices"
	"sync"
)

// MemoryPolicies is a PolicyStore in a map.
type MemoryPolicies struct {
	mu sync.RWMutex
	m  map[string]PolicyDoc
}

// NewMemoryPolicies returns an empty store.
func NewMemoryPolicies() *MemoryPolicies { return &MemoryPolicies{m: map[string]PolicyDoc{}} }

func (s *MemoryPolicies) Get(_ context.Context, user string) (PolicyDoc, bool, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	d, ok := s.m[user]
	d.Contacts, d.Blocked, d.HiddenFrom = slices.Clone(d.Contacts), slices.Clone(d.Blocked), slices.Clone(d.HiddenFrom)
	return d, ok, nil
}

func (s *MemoryPolicies) Put(_ context.Context, user string, d PolicyDoc) error {
	if err := d.Validate(user); err != nil {
		return err
	}
	d.Contacts, d.Blocked, d.HiddenFrom = slices.Clone(d.Contacts), slices.Clone(d.Blocked), slices.Clone(d.HiddenFrom)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m[user] = d
	return nil
}
