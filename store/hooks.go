package store

import (
	"cmp"
	"context"
	"slices"
	"sync"
)

// HookRow is one user's latest change not yet delivered to one webhook
// endpoint: a row per endpoint and user, whatever the number of changes
// (a newer one replaces it), so a receiver that is down costs at most a
// row per user.
type HookRow struct {
	Endpoint string // the endpoint's key (webhook.Endpoint.Key)
	User     string
	Version  uint64 // the view's version of the change: a row keeps the highest
	Owner    string // the node that delivers it: the user's view's
	Shard    int    // which of the endpoint's delivery workers takes it
	AtMs     int64  // when the change was published (Unix ms)
	Body     []byte // the event, JSON
	// Delivered: the receiver has it, and the row stays as what the
	// receiver last knows of an online user, so that a survivor of its
	// owner can tell the receiver what changed since (a change the owner
	// published but had not written when it died).
	Delivered bool
}

// HookKey names a delivered row: the user and the version delivered;
// Keep leaves the row, marked delivered (an online user's), else it goes.
type HookKey struct {
	User    string
	Version uint64
	Keep    bool
}

// HookStore keeps the webhook rows every node can read: the node that owns
// a user's view writes them, and delivers them; a survivor claims those of
// a node that died.
type HookStore interface {
	// PutHooks writes rows in one transaction, each replacing the row of
	// its endpoint and user if its version is higher (else the row stays),
	// not delivered.
	PutHooks(ctx context.Context, rows []HookRow) error
	// PendingHooks returns up to limit rows of endpoint that owner
	// delivers and has not delivered, in shards, the oldest first.
	PendingHooks(ctx context.Context, endpoint, owner string, shards []int, limit int) ([]HookRow, error)
	// DoneHooks marks delivered (Keep) or deletes the rows of endpoint
	// that were delivered: each user's if its version is not above the one
	// delivered (a newer change written meanwhile stays to deliver).
	DoneHooks(ctx context.Context, endpoint string, done []HookKey) error
	// OrphanHooks returns up to limit rows of endpoint whose owner is none
	// of alive, delivered or not.
	OrphanHooks(ctx context.Context, endpoint string, alive []string, limit int) ([]HookRow, error)
	// OwnedHooks returns up to limit rows of endpoint that owner owns, by
	// user after after (a page; "": from the first), delivered or not.
	OwnedHooks(ctx context.Context, endpoint, owner, after string, limit int) ([]HookRow, error)
	// ClaimHooks makes to the owner of users' rows of endpoint that from
	// still owns.
	ClaimHooks(ctx context.Context, endpoint, from, to string, users []string) error
	// CountHooks counts the rows of endpoint not yet delivered that owner
	// delivers ("": every owner's).
	CountHooks(ctx context.Context, endpoint, owner string) (int, error)
}

// MemoryHooks is a HookStore in a map, for one node and tests.
type MemoryHooks struct {
	mu   sync.Mutex
	rows map[[2]string]HookRow
	fail error // every call fails with it (tests of a store that went away)
}

// NewMemoryHooks returns an empty store.
func NewMemoryHooks() *MemoryHooks { return &MemoryHooks{rows: map[[2]string]HookRow{}} }

// Fail makes every call fail with err (nil: work again).
func (s *MemoryHooks) Fail(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fail = err
}

func (s *MemoryHooks) PutHooks(_ context.Context, rows []HookRow) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return s.fail
	}
	for _, r := range rows {
		k := [2]string{r.Endpoint, r.User}
		if old, ok := s.rows[k]; !ok || r.Version > old.Version {
			r.Body, r.Delivered = slices.Clone(r.Body), false
			s.rows[k] = r
		}
	}
	return nil
}

func (s *MemoryHooks) PendingHooks(_ context.Context, endpoint, owner string, shards []int, limit int) ([]HookRow, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return nil, s.fail
	}
	var out []HookRow
	for _, r := range s.rows {
		if r.Endpoint == endpoint && r.Owner == owner && !r.Delivered && slices.Contains(shards, r.Shard) {
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b HookRow) int { return cmp.Or(cmp.Compare(a.AtMs, b.AtMs), cmp.Compare(a.User, b.User)) })
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

func (s *MemoryHooks) DoneHooks(_ context.Context, endpoint string, done []HookKey) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return s.fail
	}
	for _, d := range done {
		k := [2]string{endpoint, d.User}
		r, ok := s.rows[k]
		switch {
		case !ok || r.Version > d.Version:
		case d.Keep:
			r.Delivered = true
			s.rows[k] = r
		default:
			delete(s.rows, k)
		}
	}
	return nil
}

func (s *MemoryHooks) OrphanHooks(_ context.Context, endpoint string, alive []string, limit int) ([]HookRow, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return nil, s.fail
	}
	var out []HookRow
	for _, r := range s.rows {
		if r.Endpoint == endpoint && !slices.Contains(alive, r.Owner) && len(out) < limit {
			out = append(out, r)
		}
	}
	return out, nil
}

func (s *MemoryHooks) OwnedHooks(_ context.Context, endpoint, owner, after string, limit int) ([]HookRow, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return nil, s.fail
	}
	var out []HookRow
	for _, r := range s.rows {
		if r.Endpoint == endpoint && r.Owner == owner && r.User > after {
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b HookRow) int { return cmp.Compare(a.User, b.User) })
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

func (s *MemoryHooks) ClaimHooks(_ context.Context, endpoint, from, to string, users []string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return s.fail
	}
	for _, u := range users {
		k := [2]string{endpoint, u}
		if r, ok := s.rows[k]; ok && r.Owner == from {
			r.Owner = to
			s.rows[k] = r
		}
	}
	return nil
}

func (s *MemoryHooks) CountHooks(_ context.Context, endpoint, owner string) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return 0, s.fail
	}
	n := 0
	for k, r := range s.rows {
		if k[0] == endpoint && !r.Delivered && (owner == "" || r.Owner == owner) {
			n++
		}
	}
	return n, nil
}
