package gateway

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/presence-im/presence/actors"
	"github.com/presence-im/presence/client"
	"github.com/presence-im/presence/config"
	"github.com/presence-im/presence/messages"
)

// The handshake's device parameters: an unknown platform, activity or
// class is 400 naming it, and writes nothing (no lease, no floor, no
// actor).
func TestHandshakeDeviceParams(t *testing.T) {
	nd := startNode(t)
	for _, q := range []string{"platform=phone", "platform=Mobile", "activity=away", "class=turbo"} {
		r := upgradeRequest(nd.url() + "?attempt=9&" + q)
		r.Header.Set("Authorization", "Bearer "+nd.token("bob", "phone"))
		res, err := http.DefaultClient.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		name := strings.SplitN(q, "=", 2)
		if res.StatusCode != 400 || !strings.Contains(string(body), name[0]+` "`+name[1]+`"`) {
			t.Errorf("%s: %d %q, want 400 naming it", q, res.StatusCode, body)
		}
	}
	if d := nd.route("bob"); len(d) != 0 {
		t.Fatalf("bob has devices %v after refused handshakes", d)
	}
	if c := nd.n.Counts()["connection"]; c != 0 {
		t.Fatalf("connection actors = %d, want 0", c)
	}
}

// The hello tells a battery device its class's interval, stale and
// half-open bound, and the node's idle-after; the route lists the
// device's platform and activity.
func TestHelloOfTheBatteryClass(t *testing.T) {
	nd := startNode(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, nd.url(), client.DialOptions{Token: nd.token("alice", "phone"), Attempt: 1,
		Platform: messages.Platform_mobile, Activity: messages.Activity_background, Class: config.ClassBattery})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	b, _ := nd.timing.Class(config.ClassBattery)
	h := c.Hello
	if h.GetHeartbeatClass() != "battery" || h.GetHeartbeatIntervalMs() != uint32(b.Heartbeat.Milliseconds()) ||
		h.GetStaleMs() != uint32(b.Stale.Milliseconds()) || h.GetHalfOpenBoundMs() != uint32(b.HalfOpen.Milliseconds()) ||
		h.GetIdleAfterMs() != uint32(nd.timing.IdleAfter.Milliseconds()) || h.GetPlatform() != messages.Platform_mobile {
		t.Fatalf("hello %v, want the battery class %+v", h, b)
	}
	if b.Heartbeat != time.Duration(nd.timing.BatteryFactor)*nd.timing.Heartbeat {
		t.Fatalf("battery heartbeat %v", b.Heartbeat)
	}
	d := nd.route("alice")
	if len(d) != 1 || d[0].GetPlatform() != messages.Platform_mobile || d[0].GetActivity() != messages.Activity_background {
		t.Fatalf("route %v", d)
	}
}

// aliceWatched is alice's laptop on sub (the subprotocol), heartbeating,
// and bob's connection subscribed to her once her view has the laptop,
// its snapshot read: the next presence bob gets is a change.
func (nd *node) aliceWatched(t *testing.T, sub string) (alice, bob *client.Conn) {
	t.Helper()
	ctx := t.Context()
	nd.policy("alice", "bob")
	alice = nd.dial("alice", "laptop", 1, sub)
	nd.keepAlive(ctx, alice)
	eventually(t, 2*time.Second, "alice's laptop in her view", func() bool { return len(nd.route("alice")) == 1 })
	bob = nd.dial("bob", "phone", 1)
	nd.keepAlive(ctx, bob)
	if err := bob.Subscribe(ctx, "s1", "alice"); err != nil {
		t.Fatal(err)
	}
	next(t, bob, 2*time.Second, func(f *messages.Frame) bool { return f.GetSnapshot() != nil })
	return alice, bob
}

// expectNoEvent has alice set a marker status and fails unless it is the
// next presence bob gets: whatever alice sent before sent him nothing.
func expectNoEvent(t *testing.T, alice, bob *client.Conn) {
	t.Helper()
	if err := alice.SetStatusText(t.Context(), messages.Show_away, "marker", time.Time{}); err != nil {
		t.Fatal(err)
	}
	f := next(t, bob, 2*time.Second, func(f *messages.Frame) bool { return f.GetPresence() != nil })
	if p := f.GetPresence(); p.GetStatusText() != "marker" {
		t.Fatalf("bob got %v before the marker: a refused frame changed what he sees", p)
	}
}

// Bad device-state frames get an error frame naming the rule and change
// nothing, neither the state nor what a subscriber is sent; set_activity
// beyond its bucket is 429 with retry_after_ms.
func TestBadStateFrames(t *testing.T) {
	nd := startNode(t, func(o *Options, _ *actors.Deps) { o.ActivityRate, o.ActivityBurst = 0.5, 2 })
	c, bob := nd.aliceWatched(t, client.ProtoJSON)
	ctx := t.Context()
	long := strings.Repeat("x", 141)
	past := time.Now().Add(-time.Minute).UnixMilli()
	for _, tc := range []struct{ raw, rule string }{
		{`{"set_activity":{"activity":"away"}}`, "must be active, idle or background"}, // an unknown name is dropped: none
		{`{"set_activity":{"activity":9}}`, "must be active, idle or background"},
		{`{"set_activity":{}}`, "must be active, idle or background"},
		{`{"set_status":{"show":"dnd","text":"` + long + `"}}`, "at most 140"},
		{`{"set_status":{"show":"dnd","text":"a\u0007b"}}`, "control character"},
		{fmt.Sprintf(`{"set_status":{"show":"dnd","expires_ms":"%d"}}`, past), "not in the future"},
		{`{"state_sync":{"nonce":"x","activity":"activity_unspecified"}}`, "must be active, idle or background"},
	} {
		if err := c.SendRaw(ctx, false, []byte(tc.raw)); err != nil {
			t.Fatal(err)
		}
		f := next(t, c, 2*time.Second, func(f *messages.Frame) bool { return f.GetError() != nil })
		if e := f.GetError(); e.GetCode() != 400 || !strings.Contains(e.GetMessage(), tc.rule) {
			t.Fatalf("%s: error %v, want 400 naming %q", tc.raw, e, tc.rule)
		}
	}
	st, _ := nd.n.Query(ctx, "alice")
	if st.GetShow() != messages.Show_available || st.GetStatusText() != "" || st.GetDevices()[0].GetActivity() != messages.Activity_active {
		t.Fatalf("bad frames changed the state: %v", st)
	}
	expectNoEvent(t, c, bob)
	// The bucket: two at once, the third refused with a wait.
	for i, a := range []messages.Activity{messages.Activity_idle, messages.Activity_background, messages.Activity_active} {
		if err := c.SetActivity(ctx, a); err != nil {
			t.Fatal(err)
		}
		if i < 2 {
			continue
		}
		f := next(t, c, 2*time.Second, func(f *messages.Frame) bool { return f.GetError() != nil })
		if e := f.GetError(); e.GetCode() != 429 || e.GetRetryAfterMs() == 0 || !strings.Contains(e.GetMessage(), "activity-rate") {
			t.Fatalf("third set_activity: %v, want 429 naming activity-rate", e)
		}
	}
	eventually(t, 2*time.Second, "background taken, the refused active not", func() bool {
		d := nd.route("alice")
		return len(d) == 1 && d[0].GetActivity() == messages.Activity_background
	})
}

// A binary set_status whose text is not UTF-8 (proto3 refuses to decode
// it) gets a 400 naming the rule, not a bare "undecodable frame", and
// changes nothing: not the state, not what a subscriber is sent. (A JSON
// text frame that is not UTF-8 closes with 1007: TestHostileFrames.)
func TestInvalidUTF8StatusOverBinary(t *testing.T) {
	nd := startNode(t)
	alice, bob := nd.aliceWatched(t, client.ProtoBinary)
	ctx := t.Context()
	raw := withBadUTF8(t, &messages.Frame{Kind: &messages.Frame_SetStatus{SetStatus: &messages.SetStatus{Show: messages.Show_dnd, Text: "XXXX"}}})
	for range 3 { // as many as close a connection for undecodable frames
		if err := alice.SendRaw(ctx, true, raw); err != nil {
			t.Fatal(err)
		}
		f := next(t, alice, 2*time.Second, func(f *messages.Frame) bool { return f.GetError() != nil })
		if e := f.GetError(); e.GetCode() != 400 || e.GetMessage() != "set_status: text is not valid UTF-8" {
			t.Fatalf("error %v, want 400 naming the rule", e)
		}
	}
	if st, _ := nd.n.Query(ctx, "alice"); st.GetShow() != messages.Show_available || st.GetUserShow() != messages.Show_show_unspecified || st.GetStatusText() != "" {
		t.Fatalf("a refused status changed the state: %v", st)
	}
	expectNoEvent(t, alice, bob)
}

// A drifted connection is asked for its state over the wire; the SDK's
// answer makes it clean; client_ts read by the JSON fast path counts.
func TestDriftOverTheWire(t *testing.T) {
	nd := startNode(t)
	c := nd.dial("alice", "laptop", 1)
	ctx := t.Context()
	now := time.Now().UnixMilli()
	for i, seq := range []uint64{10, 11, 12, 13} { // seq grows, the client's clock goes back
		raw := fmt.Sprintf(`{"heartbeat":{"seq":"%d","client_ts_ms":"%d"}}`, seq, now-int64(i)*1000)
		if err := c.SendRaw(ctx, false, []byte(raw)); err != nil {
			t.Fatal(err)
		}
	}
	f := next(t, c, 2*time.Second, func(f *messages.Frame) bool { return f.GetStateSyncRequest() != nil })
	if d := nd.route("alice"); !d[0].GetDirty() {
		t.Fatalf("route %v, want dirty", d)
	}
	if err := c.StateSync(ctx, f.GetStateSyncRequest().GetNonce(), messages.Activity_idle); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Second, "clean and idle", func() bool {
		d := nd.route("alice")
		return !d[0].GetDirty() && d[0].GetActivity() == messages.Activity_idle
	})
}
