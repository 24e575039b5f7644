package main

import (
	"context"
	"testing"
	"time"

	"github.com/presence-im/presence/messages"
)

// A node that starts a new cluster moved no identity: a device closing
// right after the start, inside what was the settle window, is reported
// offline within the graceful-close bound, not the owner-crash one.
func TestCloseRightAfterStartIsGraceful(t *testing.T) {
	p := startProc(t, "n1", "--policy-dsn", sqliteDSN(t))
	ready := time.Now()
	var b struct {
		Graceful int64 `json:"graceful_close_ms"`
		Timing   struct {
			SettleMs int64 `json:"settle_ms"`
		} `json:"timing"`
	}
	if code := p.getJSON("/api/bounds", &b); code != 200 || b.Graceful == 0 || b.Timing.SettleMs == 0 {
		t.Fatalf("/api/bounds: %d %+v", code, b)
	}
	settle, graceful := time.Duration(b.Timing.SettleMs)*time.Millisecond, time.Duration(b.Graceful)*time.Millisecond
	p.allow("dave", "alice")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	alice := p.dialAlive(ctx, "alice", "phone", 1)
	dave := p.dial(ctx, "dave", "phone", 1)
	if s := subscribe(ctx, t, alice, "dave"); s.GetPresences()[0].GetStatus() != messages.Status_online {
		t.Fatalf("snapshot: %v", s)
	}
	closed := time.Now()
	if closed.Sub(ready) > settle/2 {
		t.Fatalf("the close came %v after the start: too late in the %v settle window to show anything", closed.Sub(ready), settle)
	}
	_ = dave.Close()
	for {
		f, err := alice.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if f.GetPresence().GetStatus() == messages.Status_offline {
			break
		}
	}
	slack := 300 * time.Millisecond // scheduling on a shared 2-core machine
	if took := time.Since(closed); took > graceful+slack {
		t.Fatalf("offline %v after the close, %v after the start: over the %v graceful bound (+%v)", took, closed.Sub(ready), graceful, slack)
	} else {
		t.Logf("offline %v after a close %v after the start (graceful bound %v, settle %v)", took, closed.Sub(ready), graceful, settle)
	}
}
