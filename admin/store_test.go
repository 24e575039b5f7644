package admin

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/presence-im/presence/store"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// pausedPolicies is a policy store that does not answer a write (a paused
// or stopped PostgreSQL) and counts the reads: a view told of a change
// reads the policy again.
type pausedPolicies struct {
	*store.MemoryPolicies
	gets atomic.Int64
}

func (p *pausedPolicies) Put(ctx context.Context, _ string, _ store.PolicyDoc) error {
	<-ctx.Done()
	return ctx.Err()
}

func (p *pausedPolicies) Get(ctx context.Context, user string) (store.PolicyDoc, bool, error) {
	p.gets.Add(1)
	return p.MemoryPolicies.Get(ctx, user)
}

// A policy change while the store does not answer fails with 503 and the
// store's error at the store's deadline, is counted, writes nothing and
// tells no view.
func TestPolicyPutWithTheStoreDown(t *testing.T) {
	paused := &pausedPolicies{MemoryPolicies: store.NewMemoryPolicies()}
	m := store.NewStoreMetrics(nil)
	m.Health, m.Wait = store.NewHealth(nil, nil), 200*time.Millisecond
	f := newFixture(t, "", func(s *Server) { s.Policies = m.InstrumentPolicies(paused) })
	start := time.Now()
	code, body := f.do(t, "PUT", "/api/users/alice/policy", `{"granularity":"exact","contacts":["bob"]}`)
	if code != 503 || !strings.Contains(body, "deadline exceeded") {
		t.Fatalf("policy PUT with the store down = %d %s, want 503 with the store's error", code, body)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("policy PUT answered after %v, want about the store's deadline", took)
	}
	if _, ok, _ := paused.MemoryPolicies.Get(context.Background(), "alice"); ok {
		t.Fatal("a policy was written")
	}
	if n := paused.gets.Load(); n != 0 {
		t.Fatalf("the store was read %d times after a failed PUT: a view was told", n)
	}
	if n := testutil.ToFloat64(m.Errors.WithLabelValues("policy_put")); n != 1 || !m.Health.Failing() {
		t.Fatalf("presence_store_errors_total{policy_put} %v, failing %v: want 1, true", n, m.Health.Failing())
	}
}
