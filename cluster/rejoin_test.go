package cluster

import (
	"context"
	"net"
	"testing"
	"time"
)

// freeAddr is a loopback address nothing listens on yet.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// Issue 13 in miniature, on real gossip: under the lease n3 alone served
// (it held the lease) and n1 and n2 fenced. Their new incarnations reach
// each other, two of the three members of their base, but both are fenced
// (Meta.Fenced), so they wait; once n3 is reachable they join it and
// serve, and n3 sees their fenced mark gone. The majority rule would have
// let the two serve at once, a second cluster beside n3's.
func TestGossipLeaseRejoinWaitsForAServingMember(t *testing.T) {
	a1, a2, a3 := freeAddr(t), freeAddr(t), freeAddr(t)
	base := voters("n1", "n2", "n3")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type started struct {
		g   *Gossip
		err error
	}
	done := make(chan started, 2)
	fenced := func(name, bind string, seeds ...string) {
		g, err := NewGossip(GossipConfig{Name: name, Bind: bind, Join: seeds, Preset: "fast", Key: []byte("0123456789abcdef"), Context: ctx,
			Meta: Meta{Actor: "127.0.0.1:9" + name[1:]}, Rejoin: &Rejoin{Base: base, Fenced: time.Now(), Stable: time.Hour, Lease: true}})
		done <- started{g, err}
	}
	go fenced("n1", a1, a2, a3)
	go fenced("n2", a2, a1, a3)
	select {
	case s := <-done: // a try at 0 s and 1 s, the next at 3 s
		if s.g != nil {
			s.g.Shutdown()
		}
		cancel() // the other gives up
		if o := <-done; o.g != nil {
			o.g.Shutdown()
		}
		t.Fatalf("a fenced node served with only fenced peers reached (err %v)", s.err)
	case <-time.After(2500 * time.Millisecond):
	}
	n3, _ := startGossipMeta(t, "n3", a3, Meta{})
	defer n3.Shutdown()
	for range 2 {
		s := <-done
		if s.err != nil {
			t.Fatal(s.err)
		}
		defer s.g.Shutdown()
	}
	waitUntil(t, 5*time.Second, "n3 sees n1 and n2 alive, no longer fenced", func() bool {
		m1, ok1 := n3.Meta("n1")
		m2, ok2 := n3.Meta("n2")
		return ok1 && ok2 && !m1.Fenced && !m2.Fenced && len(n3.Members()) == 3
	})
}
