//go:build !race

// proto.actor's remote sets grpc's global logger on every start, which the
// race detector reports when two members share a process (as in
// provider_test.go): make test runs this without -race.
package cluster

import (
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"
)

func startRemote(t *testing.T, key []byte) *actor.ActorSystem {
	t.Helper()
	quiet := actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) })
	sys := actor.NewActorSystem(quiet)
	cfg, err := RemoteConfig("127.0.0.1", 0, key)
	if err != nil {
		t.Fatal(err)
	}
	r := remote.NewRemote(sys, cfg)
	r.Start()
	t.Cleanup(func() { r.Shutdown(false) })
	return sys
}

// Two members' actor messages are counted in bytes both ways, and the
// transport's connections on both ends, with and without a cluster key
// (TLS).
func TestRemoteTraffic(t *testing.T) {
	reg := trafficRegistry(t)
	for _, key := range [][]byte{nil, []byte("0123456789abcdef0123456789abcdef")} {
		before := gathered(t, reg, "presence_remote_bytes_total")
		a, b := startRemote(t, key), startRemote(t, key)
		got := make(chan any, 1)
		pid := b.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
			if _, ok := c.Message().(*actor.PID); ok {
				got <- c.Message()
			}
		}))
		a.Root.Send(pid, actor.NewPID("a", "b"))
		select {
		case <-got:
		case <-time.After(10 * time.Second):
			t.Fatalf("key %q: the message never arrived", key)
		}
		after := gathered(t, reg, "presence_remote_bytes_total")
		for _, dir := range []string{"in", "out"} {
			if after[dir] <= before[dir] {
				t.Errorf("key %q: presence_remote_bytes_total{dir=%q} %v -> %v, want more", key, dir, before[dir], after[dir])
			}
		}
		if c := gathered(t, reg, "presence_remote_connections"); c["client"] < 1 || c["server"] < 1 {
			t.Errorf("key %q: presence_remote_connections %v, want a client and a server end open", key, c)
		}
	}
}
