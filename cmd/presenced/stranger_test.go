package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"
	"github.com/presence-im/presence/actors"
	"github.com/presence-im/presence/client"
	"github.com/presence-im/presence/cluster"
	"github.com/presence-im/presence/config"
	"github.com/presence-im/presence/gateway"
	"github.com/presence-im/presence/messages"
)

// stranger is a process on the same host with no cluster key: a proto.actor
// remote of its own, plaintext, as any attacker would build.
type stranger struct {
	sys    *actor.ActorSystem
	events chan *messages.ObsEvent
	sink   *actor.PID
}

type strangerSink chan *messages.ObsEvent

func (s strangerSink) Receive(ctx actor.Context) {
	if ev, ok := ctx.Message().(*messages.ObsEvent); ok {
		select {
		case s <- ev:
		default:
		}
	}
}

func newStranger(t *testing.T) *stranger {
	t.Helper()
	quiet := actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) })
	sys := actor.NewActorSystem(quiet)
	r := remote.NewRemote(sys, remote.Configure("127.0.0.1", 0))
	r.Start()
	t.Cleanup(func() { r.Shutdown(false) })
	s := &stranger{sys: sys, events: make(chan *messages.ObsEvent, 256)}
	s.sink = sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return strangerSink(s.events) }))
	return s
}

// actorAddr is a node's proto.actor remote address, as its admin API lists
// it (the second address of the member).
func (p *proc) actorAddr() string {
	p.t.Helper()
	var c struct {
		Members []struct {
			ID        string   `json:"id"`
			Addresses []string `json:"addresses"`
		} `json:"members"`
	}
	p.getJSON("/api/cluster", &c)
	for _, m := range c.Members {
		if m.ID == p.name && len(m.Addresses) == 2 {
			return m.Addresses[1]
		}
	}
	p.t.Fatalf("%s lists no actor address of its own", p.name)
	return ""
}

// probe asks a node's stats actor for its counts and subscribes the
// stranger's sink to its events actor, as the stranger did; it
// returns the counts' error.
func (s *stranger) probe(addr string) error {
	_, err := s.sys.Root.RequestFuture(actor.NewPID(addr, actors.StatsName), &messages.CountsQuery{}, 2*time.Second).Result()
	s.sys.Root.Send(actor.NewPID(addr, actors.EventsName), &messages.EventsSubscribe{
		Sink: &messages.PidRef{Address: s.sink.GetAddress(), Id: s.sink.GetId()}})
	return err
}

// A stranger with no key reads counts and events of a node started without
// --cluster-key (the control: the probe can see), and nothing at all from
// a cluster started with one, whose members still talk to each other (the
// cluster view counts every member, asked over the mutual-TLS remote).
func TestStrangerCannotReachTheActorTransport(t *testing.T) {
	open := startProc(t, "open", "--policy-dsn", "memory")
	key := "0123456789abcdef0123456789abcdef"
	db := "sqlite:" + filepath.Join(t.TempDir(), "presence.db")
	n1 := startProc(t, "k1", "--cluster-key", key, "--policy-dsn", db, "--admin-token", "adm")
	n2 := startProc(t, "k2", "--cluster-key", key, "--policy-dsn", db, "--admin-token", "adm", "--join", n1.gossip)
	converged(t, n1, n2)
	strangerCannotJoinOrAdmin(t, n1)
	waitFor(t, 10*time.Second, "k1 counts k2's actors over the remote", func() bool {
		var c struct {
			Actors     map[string]any `json:"actors"`
			Unanswered []string       `json:"unanswered"`
		}
		return n1.getJSON("/api/cluster", &c) == 200 && len(c.Actors) == 2 && len(c.Unanswered) == 0
	})
	s := newStranger(t)
	if err := s.probe(open.actorAddr()); err != nil {
		t.Fatalf("control: the stranger could not ask a node without a key: %v", err)
	}
	for _, p := range []*proc{n1, n2} {
		if err := s.probe(p.actorAddr()); err == nil {
			t.Fatalf("a stranger got %s's counts through its actor port", p.name)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i, p := range []*proc{open, n1, n2} {
		c := p.dial(ctx, "sam", fmt.Sprintf("d%d", i), 1)
		_ = c.CloseNow()
	}
	// The open node's device_up reaching the stranger shows its sink
	// works; by then the keyed nodes' events, sent at the same time, would
	// have come too.
	var got []string
	deadline := time.After(10 * time.Second)
	for seen := false; !seen; {
		select {
		case ev := <-s.events:
			got = append(got, ev.GetNode()+":"+ev.GetKind())
			seen = seen || ev.GetNode() == "open" && ev.GetKind() == "device_down"
		case <-deadline:
			t.Fatalf("control: the open node's events never reached the stranger: %v", got)
		}
	}
	for _, e := range got {
		if !strings.HasPrefix(e, "open:") {
			t.Fatalf("a keyed node's event reached the stranger: %v", got)
		}
	}
}

// strangerCannotJoinOrAdmin: without the key a process cannot join the
// gossip, and without the token it gets nothing from the admin API nor a
// device connection with a token of the public development secret.
func strangerCannotJoinOrAdmin(t *testing.T, p *proc) {
	t.Helper()
	g, err := cluster.NewGossip(cluster.GossipConfig{Name: "stranger", Bind: "127.0.0.1:0", Join: []string{p.gossip}, Preset: "fast"})
	if err == nil {
		g.Shutdown()
		t.Fatal("a process without the cluster key joined the gossip")
	}
	if _, ok := p.memberStates()["stranger"]; ok {
		t.Fatal("the stranger is listed as a member")
	}
	for _, r := range []struct{ method, path, body string }{
		{"GET", "/api/cluster", ""}, {"GET", "/api/events", ""}, {"GET", "/api/route/sam", ""},
		{"PUT", "/api/users/sam/policy", `{"granularity":"exact","contacts":["eve"]}`},
	} {
		req, _ := http.NewRequest(r.method, "http://"+p.admin+r.path, strings.NewReader(r.body))
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusUnauthorized {
			t.Fatalf("%s %s without the admin token: %d, want 401", r.method, r.path, res.StatusCode)
		}
	}
	dev, _ := gateway.Tokens{Key: []byte(config.DevSecret)}.Mint("sam", "phone", time.Hour)
	if _, err := client.Dial(t.Context(), "ws://"+p.listen+"/ws", client.DialOptions{Token: dev, Attempt: 1}); err == nil {
		t.Fatal("a token of the public development secret was accepted")
	}
}
