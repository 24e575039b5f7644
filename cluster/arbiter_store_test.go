package cluster

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/presence-im/presence/store"
)

// pausedArbiters is an arbiter store that never answers (a paused PostgreSQL):
// each call ends only with its caller's deadline.
type pausedArbiters struct{}

func (pausedArbiters) TakeArbiter(ctx context.Context, _, _ string, _ time.Time, _ time.Duration) (store.Arbiter, error) {
	<-ctx.Done()
	return store.Arbiter{}, ctx.Err()
}

func (pausedArbiters) ArbiterClock(ctx context.Context) (time.Time, error) {
	<-ctx.Done()
	return time.Time{}, ctx.Err()
}

// A store that hangs during a 2+1 split (docs/operations.md, "The lease
// strategy"): each ask gives up within 500 ms, the majority rule decides
// on both sides, and the log warns once, not once per ask.
func TestArbiterStoreHangs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		t0 := time.Now()
		for _, tc := range []struct {
			base []Voter
			want ArbiterCall
		}{
			{voters("+n1", "+n2", "n3"), ArbiterServe},
			{voters("+n1", "n2", "n3"), ArbiterFence},
		} {
			var out bytes.Buffer
			a := arbiter(pausedArbiters{}, "n1")
			a.Log = slog.New(slog.NewTextHandler(&out, nil))
			var call ArbiterCall
			var why string
			for at := t0.Add(time.Second); at.Before(t0.Add(5 * time.Second)); at = at.Add(100 * time.Millisecond) {
				start := time.Now()
				call, why = a.Decide(at, Decide(tc.base), tc.base, false)
				if took := time.Since(start); took > 500*time.Millisecond {
					t.Fatalf("%v: a decision took %v on a hanging store, want at most 500ms", tc.base, took)
				}
			}
			if call != tc.want || a.state != ArbiterUnknown {
				t.Fatalf("%v: %v (%s), state %v, want %v by the majority rule", tc.base, call, why, a.state, tc.want)
			}
			if n := strings.Count(out.String(), "the store does not answer"); n != 1 {
				t.Fatalf("%v: %d warnings about the store, want 1:\n%s", tc.base, n, out.String())
			}
		}
	})
}
