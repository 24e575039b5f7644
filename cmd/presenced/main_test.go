package main

import (
	"errors"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/presence-im/presence/config"
)

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

// A node reachable from other hosts refuses to start without its secrets:
// exit 2, one line per missing item, before it binds anything.
func TestOffLoopbackWithoutSecretsExits2(t *testing.T) {
	cmd := exec.Command(binary(t), "--admin", "0.0.0.0:0", "--listen", "127.0.0.1:0", "--gossip", "127.0.0.1:0")
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 2 {
		t.Fatalf("exit %v, want 2:\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d lines, want one per missing item:\n%s", len(lines), out)
	}
	for i, want := range []string{"cluster-key", "admin-token", "secret"} {
		if !strings.Contains(lines[i], want+" (or "+want+"-file)") || !strings.Contains(lines[i], "admin 0.0.0.0:0 is not loopback") {
			t.Errorf("line %d = %q, want it to name %s and why", i, lines[i], want)
		}
	}
}

// The admin API answers the advertised name too: compose containers call
// each other's admin by service name.
func TestAdminHosts(t *testing.T) {
	for _, tc := range []struct {
		advertise string
		allowed   []string
		want      []string
	}{
		{"", nil, nil},
		{"node1", []string{"ops.example"}, []string{"ops.example", "node1"}},
		{"node1:7946", nil, []string{"node1"}},
		{"10.0.0.5", nil, []string{"10.0.0.5"}},
	} {
		got := adminHosts(config.Config{Advertise: tc.advertise, AdminAllowedHosts: tc.allowed})
		if !slices.Equal(got, tc.want) {
			t.Errorf("advertise %q allowed %v: %v, want %v", tc.advertise, tc.allowed, got, tc.want)
		}
	}
}
