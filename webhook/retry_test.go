package webhook

import (
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/presence-im/presence/store"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// A receiver answering 500 gets the batch again after waits drawn from
// [0, backoff) with the node's seeded source, the back-off doubling from
// BackoffMin to BackoffMax: the same seed gives the same waits, to the
// nanosecond of fake time. The batch keeps its delivery id.
func TestRetryBackoffAndJitter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rc := &receiver{answer: func(n int) (int, http.Header) {
			if n <= 8 {
				return 500, nil
			}
			return 200, nil
		}}
		n := start(t, rc, store.NewMemoryHooks(), func(c *Config) { c.Limits.Workers = 1; c.Rand = rand.New(rand.NewPCG(7, 7)) })
		n.Changed(ev("alice", 1, "online"))
		settle(5 * time.Second)
		if rc.n != 9 {
			t.Fatalf("%d requests, want 8 refused and 1 taken", rc.n)
		}
		want := rand.New(rand.NewPCG(7, 7))
		backoff := n.cfg.Limits.BackoffMin
		var backoffs []time.Duration
		for i := 1; i < rc.n; i++ {
			wait := rc.times[i].Sub(rc.times[i-1])
			if expect := time.Duration(want.Int64N(int64(backoff))); wait != expect {
				t.Fatalf("wait %d: %v, want %v drawn from [0, %v)", i, wait, expect, backoff)
			}
			if wait < 0 || wait >= backoff {
				t.Fatalf("wait %d: %v outside [0, %v)", i, wait, backoff)
			}
			backoffs = append(backoffs, backoff)
			backoff = min(2*backoff, n.cfg.Limits.BackoffMax)
		}
		if !slices.Equal(backoffs, scaled(5, 10, 20, 40, 40, 40, 40, 40)) {
			t.Fatalf("back-offs %v: want doubling from 5ms to 40ms", backoffs)
		}
		for _, id := range rc.ids {
			if id != rc.ids[0] {
				t.Fatalf("delivery ids %v: want the same for the same batch", rc.ids)
			}
		}
		if r := testutil.ToFloat64(n.m.retried.WithLabelValues(n.label())); r != 8 {
			t.Fatalf("retried %v, want 8", r)
		}
		n.Changed(ev("alice", 2, "online"))
		settle(time.Second)
		if rc.ids[len(rc.ids)-1] == rc.ids[0] {
			t.Fatal("another batch has the same delivery id")
		}
	})
}

func scaled(ms ...time.Duration) []time.Duration {
	out := make([]time.Duration, len(ms))
	for i, m := range ms {
		out[i] = m * time.Millisecond
	}
	return out
}

// Retry-After, in seconds or as an HTTP date (whole seconds), holds the
// batch back that long even though the back-off is a few milliseconds.
func TestRetryAfterHonoured(t *testing.T) {
	for _, tc := range []struct {
		name  string
		after func(now time.Time) (string, time.Duration)
	}{
		{"seconds", func(time.Time) (string, time.Duration) { return "30", 30 * time.Second }},
		{"http date", func(now time.Time) (string, time.Duration) {
			at := now.Add(time.Minute).Truncate(time.Second)
			return at.UTC().Format(http.TimeFormat), at.Sub(now)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rc := &receiver{}
				var want time.Duration
				rc.answer = func(n int) (int, http.Header) {
					if n == 1 {
						var v string
						v, want = tc.after(time.Now())
						return 503, http.Header{"Retry-After": {v}}
					}
					return 200, nil
				}
				n := start(t, rc, store.NewMemoryHooks())
				n.Changed(ev("alice", 1, "online"))
				settle(2 * time.Minute)
				if rc.n != 2 {
					t.Fatalf("%d requests, want 2", rc.n)
				}
				if wait := rc.times[1].Sub(rc.times[0]); wait != want || want < 30*time.Second {
					t.Fatalf("sent again after %v, want the Retry-After %v", wait, want)
				}
			})
		})
	}
}

// The wait is never longer than maxRetryAfter, whatever the receiver asks;
// a Retry-After that does not parse counts for nothing.
func TestRetryWait(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 1))
	for range 1000 {
		if w := retryWait(r, time.Second, 0); w < 0 || w >= time.Second {
			t.Fatalf("wait %v outside [0, 1s)", w)
		}
	}
	if w := retryWait(r, time.Millisecond, time.Hour); w != maxRetryAfter {
		t.Fatalf("wait %v for a Retry-After of an hour, want the cap %v", w, maxRetryAfter)
	}
	for v, want := range map[string]time.Duration{"": 0, "soon": 0, "-3": 0, "7": 7 * time.Second} {
		if got := retryAfter(v); got != want {
			t.Errorf("Retry-After %q: %v, want %v", v, got, want)
		}
	}
}

// A repeated failure is logged at its first occurrence, then once a minute
// with the count since.
func TestBurstLogsOncePerMinute(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := start(t, &receiver{}, store.NewMemoryHooks())
		var b burst
		for range 10 {
			b.note(n.cfg.Log, "webhook: something failed")
			time.Sleep(time.Second)
		}
		time.Sleep(time.Minute)
		b.note(n.cfg.Log, "webhook: something failed")
		log := n.logged()
		if c := strings.Count(log, "something failed"); c != 2 {
			t.Fatalf("logged %d lines, want 2:\n%s", c, log)
		}
		if !strings.Contains(log, "times=1\n") || !strings.Contains(log, "times=10\n") {
			t.Fatalf("want times=1, then times=10 (9 held back and the last):\n%s", log)
		}
	})
}
