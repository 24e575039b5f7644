package main

import "testing"

// An invalid configuration exits 2 before anything starts.
func TestInvalidConfigExits2(t *testing.T) {
	for _, args := range [][]string{
		{"--ttl", "1s", "--timing", "fast"},
		{"--timing", "slow"},
		{"--stale", "10s"},
		{"--outbox", "-1"},
		{"--cluster-key", "short"},
		{"--policy-dsn", "mysql://x"},
		{"stray-argument"},
	} {
		if code := run(args); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}
}
