package main

import (
	"context"
	"net"
	"slices"
	"testing"
	"time"
)

// Two nodes whose gossip and actor remote are advertised with a fixed
// remote port (what containers and firewalls need), joined by a seed
// name: each lists the other at the advertised addresses, and a
// device on n2 is routed through the remote to its lease on n1 or n2.
func TestAdvertisedAddresses(t *testing.T) {
	r1, r2 := freePort(t), freePort(t)
	_, port1, _ := net.SplitHostPort(r1)
	_, port2, _ := net.SplitHostPort(r2)
	_, gossip1, _ := net.SplitHostPort(freePort(t))
	// n1 binds every interface and is reached at 127.0.0.9 (loopback too):
	// what the others see of it can only come from --advertise.
	// Off loopback, it needs its secrets: the remote runs mutual TLS at the
	// advertised addresses.
	secrets := []string{"--cluster-key", "0123456789abcdef", "--admin-token", "adm"}
	n1 := startProc(t, "n1", append([]string{"--policy-dsn", "memory", "--gossip", "0.0.0.0:" + gossip1, "--advertise", "127.0.0.9", "--remote-port", port1}, secrets...)...)
	n2 := startProc(t, "n2", append([]string{"--policy-dsn", "memory", "--advertise", "127.0.0.1", "--remote-port", port2,
		"--join", "localhost:" + gossip1, "--join-retry", "10s"}, secrets...)...)
	converged(t, n1, n2)
	var c struct {
		Members []struct {
			ID        string   `json:"id"`
			Addresses []string `json:"addresses"`
		} `json:"members"`
	}
	n2.getJSON("/api/cluster", &c)
	want := map[string][]string{"n1": {"127.0.0.9:" + gossip1, "127.0.0.9:" + port1}, "n2": {n2.gossip, "127.0.0.1:" + port2}}
	for _, m := range c.Members {
		if !slices.Equal(m.Addresses, want[m.ID]) {
			t.Errorf("%s at %v, want %v", m.ID, m.Addresses, want[m.ID])
		}
	}
	if len(c.Members) != 2 {
		t.Fatalf("members %+v", c.Members)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	users := []string{"ann", "bob", "cat", "dan", "eli", "fay"}
	for _, u := range users {
		keepAlive(ctx, n2.dial(ctx, u, "phone", 1))
	}
	n1.waitOnline(users...)
}
