package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/presence-im/presence/core"
)

// ErrBadPolicy is wrapped by every policy validation error.
var ErrBadPolicy = errors.New("store: bad policy")

// MaxListLen bounds each of a policy's lists.
const MaxListLen = 5000

// PolicyDoc is a policy as written by PUT /api/users/{user}/policy.
type PolicyDoc struct {
	Granularity core.Granularity `json:"granularity"`
	Contacts    []string         `json:"contacts"`
	Blocked     []string         `json:"blocked"`
	HiddenFrom  []string         `json:"hidden_from"`
	// CoarseFor are contacts that see coarse presence where the others
	// see exact (a colleague who needs to know "online", not the devices).
	CoarseFor []string `json:"coarse_for,omitempty"`
}

// Validate checks a policy document of user.
func (d PolicyDoc) Validate(user string) error {
	switch d.Granularity {
	case core.Exact, core.Coarse, core.Hidden:
	default:
		return fmt.Errorf("%w: granularity %q: must be exact, coarse or hidden", ErrBadPolicy, d.Granularity)
	}
	for _, l := range []struct {
		name string
		v    []string
	}{{"contacts", d.Contacts}, {"blocked", d.Blocked}, {"hidden_from", d.HiddenFrom}, {"coarse_for", d.CoarseFor}} {
		if len(l.v) > MaxListLen {
			return fmt.Errorf("%w: %s has %d entries: at most %d", ErrBadPolicy, l.name, len(l.v), MaxListLen)
		}
		for _, u := range l.v {
			if err := core.ValidID("user", u); err != nil {
				return fmt.Errorf("%w: %s: %v", ErrBadPolicy, l.name, err)
			}
		}
		if slices.Contains(l.v, user) {
			return fmt.Errorf("%w: %s names the user %q itself", ErrBadPolicy, l.name, user)
		}
	}
	return nil
}

// Policy converts a document into the core's form.
func (d PolicyDoc) Policy() *core.Policy {
	set := func(l []string) map[string]bool {
		m := make(map[string]bool, len(l))
		for _, u := range l {
			m[u] = true
		}
		return m
	}
	p := &core.Policy{Granularity: d.Granularity, Contacts: set(d.Contacts), Blocked: set(d.Blocked), HiddenFrom: set(d.HiddenFrom)}
	if len(d.CoarseFor) > 0 {
		p.CoarseFor = set(d.CoarseFor)
	}
	return p
}

// PolicyStore keeps users' privacy policies.
type PolicyStore interface {
	// Get returns the user's policy, or ok false when it has none.
	Get(ctx context.Context, user string) (doc PolicyDoc, ok bool, err error)
	// Put validates and stores a policy; an invalid one changes nothing.
	Put(ctx context.Context, user string, doc PolicyDoc) error
}

// ViewLoader is a store of policies that also keeps last-seen times and
// reads both of a user in one round trip: what a view's activation needs
// (one per user that connects cold). The node uses it when its
// PolicyStore has it; else it reads the two apart.
type ViewLoader interface {
	// LoadView returns the user's policy (ok false: none) and last
	// departure (zero: never seen).
	LoadView(ctx context.Context, user string) (doc PolicyDoc, ok bool, lastSeen time.Time, err error)
}

// EncodePolicy validates d as user's policy and returns what a store
// writes: its JSON.
func EncodePolicy(user string, d PolicyDoc) ([]byte, error) {
	if err := d.Validate(user); err != nil {
		return nil, err
	}
	return json.Marshal(d)
}

// DecodePolicy reads what a store wrote for user's policy, found; err is
// the lookup's error, if any.
func DecodePolicy(user string, raw []byte, err error) (PolicyDoc, bool, error) {
	if err != nil {
		return PolicyDoc{}, false, fmt.Errorf("store: policy of %s: %w", user, err)
	}
	var d PolicyDoc
	if err := json.Unmarshal(raw, &d); err != nil {
		return PolicyDoc{}, false, fmt.Errorf("store: policy of %s: %w", user, err)
	}
	return d, true, nil
}
