package store

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// pausedStore answers nothing until its caller gives up, as a paused
// PostgreSQL does.
type pausedStore struct{ MemoryHistory }

func (*pausedStore) Floor(ctx context.Context, _, _ string) (uint64, error) {
	<-ctx.Done()
	return 0, ctx.Err()
}

func (*pausedStore) Get(ctx context.Context, _ string) (PolicyDoc, bool, error) {
	<-ctx.Done()
	return PolicyDoc{}, false, ctx.Err()
}

func (*pausedStore) Put(ctx context.Context, _ string, _ PolicyDoc) error {
	<-ctx.Done()
	return ctx.Err()
}

// A paused store's calls, made without a deadline of their own, fail at
// the store's Wait: counted in presence_store_errors_total, the operation
// failing (presence_store_failing), instead of hanging.
func TestStoreWaitFailsAPausedStore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := NewStoreMetrics(nil)
		m.Health = NewHealth(nil, nil)
		m.Wait = 750 * time.Millisecond
		paused := &pausedStore{}
		h, p := m.InstrumentHistory(paused), m.InstrumentPolicies(paused)
		start := time.Now()
		if _, err := h.Floor(context.Background(), "alice", "phone"); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("floor on a paused store: %v, want the deadline", err)
		}
		if _, _, err := p.Get(context.Background(), "alice"); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("policy on a paused store: %v, want the deadline", err)
		}
		if took := time.Since(start); took != 2*m.Wait {
			t.Fatalf("two calls took %v, want %v each", took, m.Wait)
		}
		for _, op := range []string{"floor", "policy_get"} {
			if n := testutil.ToFloat64(m.Errors.WithLabelValues(op)); n != 1 {
				t.Errorf("presence_store_errors_total{op=%q} %v, want 1", op, n)
			}
			if f := testutil.ToFloat64(m.Health.failing.WithLabelValues(op)); f != 1 {
				t.Errorf("presence_store_failing{op=%q} %v, want 1", op, f)
			}
		}
		// A caller's own earlier deadline still counts.
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		start = time.Now()
		_ = p.Put(ctx, "alice", PolicyDoc{})
		if took := time.Since(start); took != 100*time.Millisecond {
			t.Fatalf("a put with its own 100ms deadline took %v", took)
		}
	})
}
