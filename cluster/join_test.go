package cluster

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// A seed given by name is resolved again on every try: a name that does
// not resolve yet (a container or pod not created) is retried until it
// does, and the node joins then.
func TestGossipJoinReresolvesSeedNames(t *testing.T) {
	a, _ := startGossip(t, "n1")
	defer a.Shutdown()
	_, port, _ := net.SplitHostPort(a.Addr())
	var tries atomic.Int32
	resolve := func(_ context.Context, host string) ([]string, error) {
		if host != "seed.presence.test" {
			t.Errorf("resolved %q", host)
		}
		if tries.Add(1) < 3 {
			return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
		}
		return []string{"127.0.0.1"}, nil
	}
	b, err := NewGossip(GossipConfig{Name: "n2", Bind: "127.0.0.1:0", Join: []string{"seed.presence.test:" + port}, Preset: "fast",
		Key: []byte("0123456789abcdef"), JoinRetry: 20 * time.Second, Resolve: resolve})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Shutdown()
	if n := tries.Load(); n != 3 {
		t.Fatalf("resolved %d times, want 3 (twice not found, then found)", n)
	}
	waitUntil(t, 5*time.Second, "2 members at n1", func() bool { return len(a.Members()) == 2 })
}

// Without JoinRetry, one failed try is the answer; with it, the node gives
// up at the deadline or when its context ends, naming the seeds and why.
func TestGossipJoinGivesUp(t *testing.T) {
	notFound := func(_ context.Context, host string) ([]string, error) {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	start := time.Now()
	_, err := NewGossip(GossipConfig{Name: "x", Bind: "127.0.0.1:0", Join: []string{"gone.presence.test:7946"}, Preset: "fast", Resolve: notFound})
	if err == nil || !strings.Contains(err.Error(), "gone.presence.test") || time.Since(start) > joinEvery {
		t.Fatalf("one try: %v after %v", err, time.Since(start))
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	time.AfterFunc(joinEvery/2, func() { cancel(errors.New("stopping")) })
	start = time.Now()
	_, err = NewGossip(GossipConfig{Name: "x", Bind: "127.0.0.1:0", Join: []string{"gone.presence.test:7946"}, Preset: "fast",
		Resolve: notFound, JoinRetry: time.Minute, Context: ctx})
	if err == nil || !strings.Contains(err.Error(), "stopping") || !strings.Contains(err.Error(), "no such host") || time.Since(start) > 5*joinEvery {
		t.Fatalf("a cancelled join: %v after %v", err, time.Since(start))
	}
}

// Every member may list every member as a seed, itself included: the first
// one up joins itself and starts the cluster (a StatefulSet's pod 0, the
// first compose service), the others join it.
func TestGossipJoinThroughItself(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	self := l.Addr().String()
	l.Close()
	a, err := NewGossip(GossipConfig{Name: "n1", Bind: self, Join: []string{self, "127.0.0.1:1"}, Preset: "fast"})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Shutdown()
	if n := len(a.Members()); n > 1 {
		t.Fatalf("%d members", n)
	}
}

// A member bound to every interface advertises the address the others
// reach it at: they see and use that one.
func TestGossipAdvertise(t *testing.T) {
	// 127.0.0.9 is loopback too, but not the address a is bound by name to.
	// The port must be the same bound and advertised, so it is picked here:
	// one free for TCP on every address may be taken for UDP, or taken by
	// another test before memberlist binds it, so a few are tried.
	var a *Gossip
	var port string
	for try := 0; a == nil; try++ {
		l, err := net.Listen("tcp", "0.0.0.0:0")
		if err != nil {
			t.Fatal(err)
		}
		_, port, _ = net.SplitHostPort(l.Addr().String())
		l.Close()
		a, err = NewGossip(GossipConfig{Name: "n1", Bind: "0.0.0.0:" + port, Advertise: "127.0.0.9:" + port, Preset: "fast", Key: []byte("0123456789abcdef")})
		if err != nil && (try == 9 || !strings.Contains(err.Error(), "address already in use")) {
			t.Fatal(err)
		}
	}
	defer a.Shutdown()
	if a.Addr() != "127.0.0.9:"+port {
		t.Fatalf("a advertises %s", a.Addr())
	}
	// n2 joins in NewGossip, before a subscriber could hear n1 join: its
	// member list says where it sees n1.
	b, _ := startGossip(t, "n2", a.Addr())
	defer b.Shutdown()
	var n1 Member
	waitUntil(t, 5*time.Second, "n1 at n2", func() bool {
		for _, m := range b.Members() {
			if m.ID == "n1" {
				n1 = m
				return true
			}
		}
		return false
	})
	if n1.Addresses[0] != "127.0.0.9:"+port {
		t.Fatalf("n2 sees n1 at %v", n1.Addresses)
	}
	if _, err := NewGossip(GossipConfig{Name: "n3", Bind: "127.0.0.1:0", Advertise: "presence-1:7946"}); err == nil {
		t.Fatal("an advertised name (not an IP) was taken")
	}
}

func TestAdvertised(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct{ advertise, bind, want string }{
		{"", "127.0.0.1:7946", ""},                           // bound where the others reach it
		{"10.1.2.3", "0.0.0.0:7946", "10.1.2.3:7946"},        // the bind's port
		{"10.1.2.3:30946", "0.0.0.0:7946", "10.1.2.3:30946"}, // a NAT's port
		{"localhost:7000", "0.0.0.0:7946", "127.0.0.1:7000"}, // a name, resolved
	} {
		got, err := Advertised(ctx, c.advertise, c.bind)
		if err != nil || got != c.want && !(c.advertise == "localhost:7000" && got == "[::1]:7000") {
			t.Errorf("Advertised(%q, %q) = %q, %v; want %q", c.advertise, c.bind, got, err, c.want)
		}
	}
	// not a valid domain name: refused without a query leaving the machine
	if _, err := Advertised(ctx, "bad..host", "0.0.0.0:7946"); err == nil || !strings.Contains(err.Error(), "bad..host") {
		t.Fatalf("an advertised name that does not resolve: %v", err)
	}
}

// With JoinRetry, a node whose only answer came from itself keeps trying
// the other seeds until one answers: here n2 knows no one but itself, so
// only n1's retries can bring the two together.
func TestGossipJoinWaitsForTheOthers(t *testing.T) {
	ports := make([]string, 2)
	for i := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ports[i] = l.Addr().String()
		l.Close()
	}
	tries := make(chan struct{}, 100)
	resolve := func(context.Context, string) ([]string, error) {
		tries <- struct{}{}
		return []string{"127.0.0.1"}, nil
	}
	_, p1, _ := net.SplitHostPort(ports[1])
	type result struct {
		g   *Gossip
		err error
	}
	first := make(chan result, 1)
	go func() {
		g, err := NewGossip(GossipConfig{Name: "n1", Bind: ports[0], Join: []string{ports[0], "n2.presence.test:" + p1}, Preset: "fast",
			JoinRetry: 20 * time.Second, Resolve: resolve})
		first <- result{g, err}
	}()
	for range 2 { // n1 tried once alone and is trying again
		select {
		case <-tries:
		case r := <-first:
			t.Fatalf("n1 stopped trying after reaching only itself: %v", r.err)
		case <-time.After(10 * time.Second):
			t.Fatal("n1 did not try its seeds again")
		}
	}
	b, err := NewGossip(GossipConfig{Name: "n2", Bind: ports[1], Join: []string{ports[1]}, Preset: "fast"})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Shutdown()
	r := <-first
	if r.err != nil {
		t.Fatal(r.err)
	}
	defer r.g.Shutdown()
	waitUntil(t, 5*time.Second, "2 members at both", func() bool { return len(r.g.Members()) == 2 && len(b.Members()) == 2 })
}
