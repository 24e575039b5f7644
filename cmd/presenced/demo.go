package main

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/presence-im/presence/actors"
	"github.com/presence-im/presence/config"
	"github.com/presence-im/presence/core"
	"github.com/presence-im/presence/messages"
	"github.com/presence-im/presence/store"
)

// demoSocket stands for a device's WebSocket in demo mode: frames are
// counted and dropped.
type demoSocket struct{ closed chan struct{} }

func (s *demoSocket) Send(*messages.Frame) bool { return true }
func (s *demoSocket) Close(messages.CloseCode, string) {
	select {
	case <-s.closed:
	default:
		close(s.closed)
	}
}

// runDemo runs cfg.Demo simulated devices (users demo-000...) that are each
// other's exact contacts. Each connects, heartbeats, and now and then closes,
// goes silent (half-open) or reconnects, so the admin API and metrics show a
// living node. It stops with ctx.
func runDemo(ctx context.Context, n *actors.Node, policies store.PolicyStore, cfg config.Config, log *slog.Logger) {
	users := make([]string, cfg.Demo)
	for i := range users {
		users[i] = fmt.Sprintf("demo-%03d", i)
	}
	for _, u := range users {
		if err := policies.Put(ctx, u, store.PolicyDoc{Granularity: core.Exact, Contacts: others(users, u)}); err != nil {
			log.Error("demo: policy", "user", u, "err", err)
		}
		n.PolicyChanged(u)
	}
	log.Info("demo devices starting", "devices", cfg.Demo, "try", "curl -s "+cfg.Admin+"/api/presence/"+users[0])
	for i, u := range users {
		go demoDevice(ctx, n, cfg, u, core.Rand(cfg.Seed, u), i)
	}
}

func others(all []string, me string) []string {
	out := make([]string, 0, len(all)-1)
	for _, u := range all {
		if u != me {
			out = append(out, u)
		}
	}
	return out
}

func demoDevice(ctx context.Context, n *actors.Node, cfg config.Config, user string, r *rand.Rand, i int) {
	t := cfg.Timing
	for attempt := uint64(1); ctx.Err() == nil; attempt++ {
		sock := &demoSocket{closed: make(chan struct{})}
		conn, err := n.Gateway().Open(ctx, actors.OpenRequest{User: user, Device: "phone", Attempt: attempt, ConnID: fmt.Sprintf("%s-demo-%s-%d", cfg.NodeID, user, attempt), Socket: sock})
		if err != nil {
			// A refused or timed-out handshake (members joining move the
			// leases): try again shortly, as a real device would.
			select {
			case <-ctx.Done():
				return
			case <-time.After(t.Heartbeat + time.Duration(r.Int64N(int64(t.Heartbeat)))):
			}
			continue
		}
		conn.Subscribe("demo", []string{fmt.Sprintf("demo-%03d", (i+1)%cfg.Demo)}, messages.Tier_realtime) // the next demo user
		// Stay 20 to 100 heartbeats, then leave one way or another.
		life := time.Duration(20+r.IntN(80)) * t.Heartbeat
		deadline := time.After(life)
		halfOpen := r.IntN(4) == 0
	beat:
		for seq := uint64(1); ; seq++ {
			select {
			case <-ctx.Done():
				return
			case <-sock.closed:
				break beat
			case <-deadline:
				if !halfOpen {
					conn.Closed()
				}
				break beat
			case <-time.After(core.HeartbeatDelay(r, t.Heartbeat, t.HeartbeatJitter)):
				conn.Heartbeat(seq, time.Now().UnixMilli())
			}
		}
		select { // away for a while (sometimes shorter than the debounce)
		case <-ctx.Done():
			return
		case <-time.After(time.Duration(r.Float64() * float64(3*t.Stale))):
		}
	}
}
