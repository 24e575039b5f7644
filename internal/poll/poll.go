// Package poll is the tests' one way to wait for a condition in real time:
// with a deadline, never a bare sleep.
package poll

import (
	"testing"
	"time"
)

// Until checks cond every interval until it holds and returns how long that
// took; past within, it fails t naming what was awaited.
func Until(t testing.TB, within, every time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > within {
			t.Fatalf("not within %v: %s", within, what)
		}
		time.Sleep(every)
	}
	return time.Since(start)
}
