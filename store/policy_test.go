package store_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/presence-im/presence/core"
	"github.com/presence-im/presence/store"
)

func ids(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("u%d", i)
	}
	return out
}

func TestPolicyDocValidate(t *testing.T) {
	tests := []struct {
		name string
		doc  store.PolicyDoc
		want []string // substrings of the error; nil: valid
	}{
		{"exact with lists", store.PolicyDoc{Granularity: core.Exact, Contacts: []string{"bob", "carol"}, Blocked: []string{"eve"}, HiddenFrom: []string{"carol"}}, nil},
		{"coarse", store.PolicyDoc{Granularity: core.Coarse}, nil},
		{"hidden", store.PolicyDoc{Granularity: core.Hidden, Contacts: []string{"bob"}}, nil},
		{"empty lists", store.PolicyDoc{Granularity: core.Exact, Contacts: []string{}, Blocked: []string{}, HiddenFrom: []string{}}, nil},
		{"blocked contact (blocked wins)", store.PolicyDoc{Granularity: core.Exact, Contacts: []string{"eve"}, Blocked: []string{"eve"}}, nil},
		{"duplicates", store.PolicyDoc{Granularity: core.Exact, Contacts: []string{"bob", "bob"}}, nil},
		{"contacts at the limit", store.PolicyDoc{Granularity: core.Exact, Contacts: ids(store.MaxListLen)}, nil},
		{"blocked at the limit", store.PolicyDoc{Granularity: core.Exact, Blocked: ids(store.MaxListLen)}, nil},
		{"hidden_from at the limit", store.PolicyDoc{Granularity: core.Exact, HiddenFrom: ids(store.MaxListLen)}, nil},

		{"no granularity", store.PolicyDoc{Contacts: []string{"bob"}}, []string{"granularity"}},
		{"unknown granularity", store.PolicyDoc{Granularity: "friends"}, []string{"granularity", `"friends"`}},
		{"granularity in upper case", store.PolicyDoc{Granularity: "Exact"}, []string{"granularity"}},

		{"itself in contacts", store.PolicyDoc{Granularity: core.Exact, Contacts: []string{"bob", "alice"}}, []string{"contacts", `"alice"`, "itself"}},
		{"itself in blocked", store.PolicyDoc{Granularity: core.Exact, Blocked: []string{"alice"}}, []string{"blocked", "itself"}},
		{"itself in hidden_from", store.PolicyDoc{Granularity: core.Coarse, HiddenFrom: []string{"alice"}}, []string{"hidden_from", "itself"}},

		{"empty id in contacts", store.PolicyDoc{Granularity: core.Exact, Contacts: []string{"bob", ""}}, []string{"contacts", "1 to 128 bytes"}},
		{"empty id in blocked", store.PolicyDoc{Granularity: core.Exact, Blocked: []string{""}}, []string{"blocked", "1 to 128 bytes"}},
		{"empty id in hidden_from", store.PolicyDoc{Granularity: core.Exact, HiddenFrom: []string{""}}, []string{"hidden_from", "1 to 128 bytes"}},
		{"dot-dot in contacts", store.PolicyDoc{Granularity: core.Exact, Contacts: []string{".."}}, []string{"contacts", `".."`}},
		{"bidi override in blocked", store.PolicyDoc{Granularity: core.Exact, Blocked: []string{"bob\u202e"}}, []string{"blocked", "only letters"}},
		{"a 3.9 MB id in hidden_from", store.PolicyDoc{Granularity: core.Exact, HiddenFrom: []string{strings.Repeat("a", 3900000)}}, []string{"hidden_from", "3900000"}},

		{"contacts over the limit", store.PolicyDoc{Granularity: core.Exact, Contacts: ids(store.MaxListLen + 1)}, []string{"contacts", "5001", "5000"}},
		{"blocked over the limit", store.PolicyDoc{Granularity: core.Exact, Blocked: ids(store.MaxListLen + 1)}, []string{"blocked", "5001"}},
		{"hidden_from over the limit", store.PolicyDoc{Granularity: core.Exact, HiddenFrom: ids(store.MaxListLen + 1)}, []string{"hidden_from", "5001"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.doc.Validate("alice")
			if tc.want == nil {
				if err != nil {
					t.Fatalf("Validate = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, store.ErrBadPolicy) {
				t.Fatalf("Validate = %v, want an error wrapping ErrBadPolicy", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Validate = %q, want it to name %q", err, w)
				}
			}
		})
	}
}

func TestPolicyDocPolicy(t *testing.T) {
	doc := store.PolicyDoc{Granularity: core.Coarse, Contacts: []string{"bob", "carol", "bob"}, Blocked: []string{"eve"}}
	got := doc.Policy()
	want := &core.Policy{
		Granularity: core.Coarse,
		Contacts:    map[string]bool{"bob": true, "carol": true},
		Blocked:     map[string]bool{"eve": true},
		HiddenFrom:  map[string]bool{},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Policy = %+v, want %+v", got, want)
	}
	// The converted policy trims as the document says.
	now := time.Date(2026, 3, 14, 12, 0, 0, 0, time.UTC)
	p := core.Presence{User: "alice", Online: true}
	if core.Trim(got, "bob", p, now) == nil || core.Trim(got, "eve", p, now) != nil || core.Trim(got, "zed", p, now) != nil {
		t.Fatal("converted policy does not trim as its document says")
	}
}

func TestMemoryPolicies(t *testing.T) {
	ctx := context.Background()
	good := store.PolicyDoc{Granularity: core.Exact, Contacts: []string{"bob"}}
	tests := []struct {
		name    string
		prev    *store.PolicyDoc // stored first, if any
		put     store.PolicyDoc
		wantErr bool
	}{
		{"first put", nil, good, false},
		{"replace", &good, store.PolicyDoc{Granularity: core.Hidden, Blocked: []string{"eve"}}, false},
		{"invalid first put stores nothing", nil, store.PolicyDoc{Granularity: "nope"}, true},
		{"invalid granularity keeps the old one", &good, store.PolicyDoc{Granularity: "nope", Contacts: []string{"carol"}}, true},
		{"naming itself keeps the old one", &good, store.PolicyDoc{Granularity: core.Exact, Contacts: []string{"alice"}}, true},
		{"empty id keeps the old one", &good, store.PolicyDoc{Granularity: core.Coarse, Blocked: []string{""}}, true},
		{"too long keeps the old one", &good, store.PolicyDoc{Granularity: core.Exact, HiddenFrom: ids(store.MaxListLen + 1)}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := store.NewMemoryPolicies()
			if tc.prev != nil {
				if err := s.Put(ctx, "alice", *tc.prev); err != nil {
					t.Fatal(err)
				}
			}
			err := s.Put(ctx, "alice", tc.put)
			if (err != nil) != tc.wantErr || err != nil && !errors.Is(err, store.ErrBadPolicy) {
				t.Fatalf("Put = %v, want error %v (ErrBadPolicy)", err, tc.wantErr)
			}
			doc, ok, gerr := s.Get(ctx, "alice")
			if gerr != nil {
				t.Fatal(gerr)
			}
			switch {
			case !tc.wantErr:
				if !ok || !reflect.DeepEqual(doc, tc.put) {
					t.Fatalf("Get = %+v, %v; want %+v", doc, ok, tc.put)
				}
			case tc.prev != nil:
				if !ok || !reflect.DeepEqual(doc, *tc.prev) {
					t.Fatalf("Get = %+v, %v; want the old %+v", doc, ok, *tc.prev)
				}
			default:
				if ok {
					t.Fatalf("Get = %+v, want none", doc)
				}
			}
			// Other users are untouched.
			if _, ok, _ := s.Get(ctx, "bob"); ok {
				t.Fatal("bob has a policy")
			}
		})
	}
}

// Put keeps its own copy: the caller may reuse its slices.
func TestMemoryPoliciesPutCopies(t *testing.T) {
	ctx := context.Background()
	s := store.NewMemoryPolicies()
	doc := store.PolicyDoc{Granularity: core.Exact, Contacts: []string{"bob"}, Blocked: []string{"eve"}, HiddenFrom: []string{"carol"}}
	if err := s.Put(ctx, "alice", doc); err != nil {
		t.Fatal(err)
	}
	doc.Contacts[0], doc.Blocked[0], doc.HiddenFrom[0] = "alice", "", "x"
	got, _, _ := s.Get(ctx, "alice")
	if got.Contacts[0] != "bob" || got.Blocked[0] != "eve" || got.HiddenFrom[0] != "carol" {
		t.Fatalf("stored policy changed with the caller's slices: %+v", got)
	}
}

// SUSPECTED BUG (store/policy_memory.go, MemoryPolicies.Get): Put clones the slices
// but Get returns the stored ones, so a caller that edits the document it got
// (e.g. to append a contact before a Put) edits the store behind its lock,
// bypassing Validate, and races with concurrent readers.
func TestMemoryPoliciesGetCopies(t *testing.T) {
	ctx := context.Background()
	s := store.NewMemoryPolicies()
	if err := s.Put(ctx, "alice", store.PolicyDoc{Granularity: core.Exact, Contacts: []string{"bob"}}); err != nil {
		t.Fatal(err)
	}
	got, _, _ := s.Get(ctx, "alice")
	got.Contacts[0] = "alice" // would break Validate
	again, _, _ := s.Get(ctx, "alice")
	if again.Contacts[0] != "bob" {
		t.Fatalf("stored policy changed through Get's result: %+v", again)
	}
}

func TestMemoryPoliciesConcurrent(t *testing.T) {
	ctx := context.Background()
	s := store.NewMemoryPolicies()
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			user := fmt.Sprintf("u%d", i%2)
			for j := range 200 {
				doc := store.PolicyDoc{Granularity: core.Exact, Contacts: []string{fmt.Sprintf("c%d", j)}}
				if j%3 == 0 {
					doc.Granularity = "bad"
				}
				_ = s.Put(ctx, user, doc)
				if d, ok, _ := s.Get(ctx, user); ok && d.Validate(user) != nil {
					t.Errorf("stored an invalid policy %+v", d)
					return
				}
			}
		})
	}
	wg.Wait()
}

// MemoryHistory, the other store of the package: floors and last-seen only
// ever grow.
func TestMemoryHistory(t *testing.T) {
	ctx := context.Background()
	t0 := time.Date(2026, 3, 14, 12, 0, 0, 0, time.UTC)
	h := store.NewMemoryHistory()
	if f, err := h.Floor(ctx, "alice", "phone"); f != 0 || err != nil {
		t.Fatalf("empty floor = %d, %v", f, err)
	}
	for _, step := range []struct {
		raise uint64
		want  uint64
	}{{3, 3}, {2, 3}, {3, 3}, {7, 7}, {0, 7}} {
		if err := h.RaiseFloor(ctx, "alice", "phone", step.raise); err != nil {
			t.Fatal(err)
		}
		if f, _ := h.Floor(ctx, "alice", "phone"); f != step.want {
			t.Fatalf("after raising to %d: floor %d, want %d", step.raise, f, step.want)
		}
	}
	if f, _ := h.Floor(ctx, "alice", "laptop"); f != 0 {
		t.Fatalf("another device's floor = %d", f)
	}
	if f, _ := h.Floor(ctx, "bob", "phone"); f != 0 {
		t.Fatalf("another user's floor = %d", f)
	}

	if ls, err := h.LastSeen(ctx, "alice"); !ls.IsZero() || err != nil {
		t.Fatalf("empty last seen = %v, %v", ls, err)
	}
	for _, step := range []struct {
		set, want time.Time
	}{{t0, t0}, {t0.Add(-time.Hour), t0}, {t0.Add(time.Minute), t0.Add(time.Minute)}, {time.Time{}, t0.Add(time.Minute)}} {
		if err := h.SetLastSeen(ctx, "alice", step.set); err != nil {
			t.Fatal(err)
		}
		if ls, _ := h.LastSeen(ctx, "alice"); !ls.Equal(step.want) {
			t.Fatalf("after setting %v: last seen %v, want %v", step.set, ls, step.want)
		}
	}
}
