package main

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/presence-im/presence/client"
	"github.com/presence-im/presence/messages"
)

// The real binary: devices connect, subscribe and get trimmed events; the
// policy is set through the admin API; SIGTERM closes devices with 1001,
// releases their leases and exits 0.
func TestBinaryEndToEnd(t *testing.T) {
	p := startProc(t, "e2e", "--policy-dsn", sqliteDSN(t))
	p.allow("dave", "alice")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	alice := p.dial(ctx, "alice", "phone", 1)
	_ = alice.Subscribe(ctx, "s1", "dave")
	if f, err := alice.Next(ctx); err != nil || f.GetSnapshot() == nil {
		t.Fatalf("snapshot: %v %v", f, err)
	}
	p.dial(ctx, "dave", "phone", 1)
	if f, err := alice.Next(ctx); err != nil || f.GetPresence().GetStatus() != messages.Status_online {
		t.Fatalf("dave online: %v %v", f, err)
	}
	res, err := http.Get("http://" + p.admin + "/api/route/dave")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()

	_ = p.node.Terminate()
	for {
		if _, err := alice.Next(ctx); err != nil {
			if code := client.CloseCode(err); code != int(messages.CloseGoingAway) {
				t.Fatalf("close on SIGTERM: %d (%v), want 1001", code, err)
			}
			break
		}
	}
	ended, err := p.node.Wait(10 * time.Second)
	if !ended {
		t.Fatalf("still running 10 s after SIGTERM\n%s", p.log())
	}
	if err != nil {
		t.Fatalf("exit: %v\n%s", err, p.log())
	}
	if !strings.Contains(p.log(), "draining") {
		t.Fatalf("no drain in the log:\n%s", p.log())
	}
}
