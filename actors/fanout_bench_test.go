package actors

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/presence-im/presence/config"
	"github.com/presence-im/presence/core"
	"github.com/presence-im/presence/messages"
	"github.com/presence-im/presence/store"
	"go.uber.org/goleak"
)

// countSocket counts the presence frames of a connection and signals when
// every subscriber has its share.
type countSocket struct {
	snaps, got *atomic.Int64
	want       *atomic.Int64
	done       chan struct{}
}

func (s countSocket) Send(f *messages.Frame) bool {
	if f.GetSnapshot() != nil {
		s.snaps.Add(1)
	}
	if f.GetPresence() != nil && s.got.Add(1) == s.want.Load() {
		s.done <- struct{}{}
	}
	return true
}

func (countSocket) Close(messages.CloseCode, string) {}

// BenchmarkEventFanout: one show change of a user watched by 5,000
// connections on the view's node, measured until every connection's socket
// was handed its frame (ns/op is per event): the actors' share of one
// offline to 5,000 subscribers (the view's trims and routing, a message per
// connection, each connection's sink), without the gateway's encoding and
// writes (gateway BenchmarkPresenceSend).
func BenchmarkEventFanout(b *testing.B) {
	const subs = 5000
	pols := store.NewMemoryPolicies()
	n, err := Start(Deps{NodeID: "n1", Timing: config.Seed(), Seed: 1, Policies: pols, History: store.NewMemoryHistory()})
	if err != nil {
		b.Fatal(err)
	}
	var conns []*Conn
	defer func() { closeAll(b, n, conns) }()
	var contacts []string
	for i := range subs {
		contacts = append(contacts, fmt.Sprintf("v%05d", i))
	}
	if err := pols.Put(context.Background(), "alice", store.PolicyDoc{Granularity: core.Exact, Contacts: contacts}); err != nil {
		b.Fatal(err)
	}
	var snaps, got, want atomic.Int64
	done := make(chan struct{}, 1)
	sock := countSocket{&snaps, &got, &want, done}
	open := func(user string) *Conn {
		c, err := n.Gateway().Open(context.Background(), OpenRequest{User: user, Device: "d", Attempt: 1, ConnID: "c" + user, Socket: sock})
		if err != nil {
			b.Fatal(err)
		}
		conns = append(conns, c)
		return c
	}
	alice := open("alice")
	for _, v := range contacts {
		open(v).Subscribe("s", []string{"alice"}, messages.Tier_realtime)
	}
	for deadline := time.Now().Add(time.Minute); snaps.Load() < subs; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d snapshots after a minute", snaps.Load(), subs)
		}
	}
	shows := []messages.Show{messages.Show_away, messages.Show_dnd}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		want.Add(subs)
		alice.SetShow(shows[i%2])
		select {
		case <-done:
		case <-time.After(time.Minute):
			b.Fatalf("%d of %d frames after a minute", got.Load(), want.Load())
		}
	}
}

// closeAll closes conns and stops n once its gateway has forgotten them
// (a node stopped with live connections leaves dead letters behind), then
// waits out proto.actor's dead-letter throttle (its goroutine lives 1 s
// after a dead letter) so TestMain's leak check sees none.
func closeAll(b *testing.B, n *Node, conns []*Conn) {
	b.StopTimer()
	for _, c := range conns {
		c.Closed()
	}
	for deadline := time.Now().Add(time.Minute); n.Gateway().conns.Load() > 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			b.Errorf("%d connections still known after a minute", n.Gateway().conns.Load())
			break
		}
	}
	n.Stop()
	for deadline := time.Now().Add(5 * time.Second); goleak.Find() != nil && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
	}
}
