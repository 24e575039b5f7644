package actors

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/presence-im/presence/config"
	"github.com/presence-im/presence/messages"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// A message to a stopped actor is counted by type and not logged at info.
func TestDeadLettersCountedNotLogged(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var buf bytes.Buffer
		m := NewMetrics(nil)
		n := newEnvWith(t, Deps{Timing: config.Fast(), Metrics: m,
			Logger: slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))}).n
		pid := n.root.Spawn(actor.PropsFromFunc(func(actor.Context) {}))
		if err := n.root.StopFuture(pid).Wait(); err != nil {
			t.Fatal(err)
		}
		for range 3 {
			n.root.Send(pid, &messages.GatewayDown{Node: "x"})
		}
		synctest.Wait()
		if got := testutil.ToFloat64(m.DeadLetters.WithLabelValues("*messages.GatewayDown")); got != 3 {
			t.Fatalf("dead letters counted: %v, want 3", got)
		}
		if strings.Contains(buf.String(), "DeadLetter") {
			t.Fatalf("dead letters logged at info: %s", buf.String())
		}
	})
}
