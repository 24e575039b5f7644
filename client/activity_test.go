package client_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/presence-im/presence/actors"
	"github.com/presence-im/presence/client"
	"github.com/presence-im/presence/config"
	"github.com/presence-im/presence/gateway"
	"github.com/presence-im/presence/messages"
	"github.com/presence-im/presence/store"
	"google.golang.org/protobuf/encoding/protojson"
)

// startNodeTiming is startNode with timings of the test's own.
func startNodeTiming(t *testing.T, timing config.Timing) *node {
	t.Helper()
	nd := &node{policies: store.NewMemoryPolicies()}
	n, err := actors.Start(actors.Deps{NodeID: "n1", Timing: timing, Seed: 1, Policies: nd.policies, History: store.NewMemoryHistory()})
	if err != nil {
		t.Fatal(err)
	}
	nd.n, nd.srv = n, gateway.New(gateway.Options{Listen: "127.0.0.1:0"}, n.Gateway(), timing, secret, nil)
	if err := nd.srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		nd.srv.Stop()
		n.Stop()
		time.Sleep(1100 * time.Millisecond)
	})
	return nd
}

// route is the user's devices as GET /api/route orders them.
func (nd *node) route(t *testing.T, user string) []*messages.DeviceState {
	t.Helper()
	st, err := nd.n.Query(context.Background(), user)
	if err != nil {
		t.Fatal(err)
	}
	return st.GetDevices()
}

// The session tells the node its platform and activity at the handshake,
// renews an active before the node's idle-after would lapse it, and sends
// a change at once.
func TestSessionDeclaresAndRenewsActivity(t *testing.T) {
	timing := config.Fast()
	timing.IdleAfter = time.Second // renewed every 500 ms: within the node's bucket for a while
	nd := startNodeTiming(t, timing)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := client.Start(ctx, client.Config{URLs: []string{nd.url()}, Token: token(t, "alice", "laptop"),
		Platform: messages.Platform_desktop, Activity: messages.Activity_active})
	waitFor(t, 5*time.Second, "alice's laptop online", func() bool { return len(nd.route(t, "alice")) == 1 })
	time.Sleep(3 * timing.IdleAfter) // renewed at every half of it
	if d := nd.route(t, "alice")[0]; d.GetPlatform() != messages.Platform_desktop || d.GetActivity() != messages.Activity_active {
		t.Fatalf("after three idle-afters %v, want the desktop active", d)
	}
	if err := s.SetActivity(messages.Activity_background); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 2*time.Second, "background", func() bool { return nd.route(t, "alice")[0].GetActivity() == messages.Activity_background })
	if err := s.SetActivity(messages.Activity(9)); err == nil || s.Activity() != messages.Activity_background {
		t.Fatalf("SetActivity(9) = %v, activity %v: want refused, background kept", err, s.Activity())
	}
	if err := s.SetStatusText(client.Status{Show: messages.Show_dnd, Text: strings.Repeat("x", 141)}); err == nil {
		t.Fatal("a text over 140 characters was taken")
	}
	cancel()
	<-s.Done()
}

// fakeNode accepts one connection, sends hello and a state sync request,
// and hands over what the client answers.
func fakeNode(t *testing.T, answers chan<- *messages.Frame) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{client.ProtoJSON}})
		if err != nil {
			return
		}
		defer c.CloseNow()
		for _, f := range []*messages.Frame{
			{Kind: &messages.Frame_Hello{Hello: &messages.Hello{ConnId: "c1", HeartbeatIntervalMs: 60000}}},
			{Kind: &messages.Frame_StateSyncRequest{StateSyncRequest: &messages.StateSyncRequest{Nonce: "n0nce"}}},
		} {
			b, _ := protojson.Marshal(f)
			if c.Write(r.Context(), websocket.MessageText, b) != nil {
				return
			}
		}
		for {
			_, b, err := c.Read(r.Context())
			if err != nil {
				return
			}
			f := &messages.Frame{}
			if protojson.Unmarshal(b, f) == nil && f.GetStateSync() != nil {
				answers <- f
				c.Close(websocket.StatusCode(messages.CloseStateSync), "test")
				return
			}
		}
	}))
	t.Cleanup(srv.Close)
	return "ws" + strings.TrimPrefix(srv.URL, "http") + "/ws"
}

// The session answers a state sync request with the nonce and its
// declared activity; a close with 4409 and no Refresh ends it with
// ErrReauthenticate.
func TestSessionAnswersStateSync(t *testing.T) {
	answers := make(chan *messages.Frame, 1)
	s := client.Start(context.Background(), client.Config{URLs: []string{fakeNode(t, answers)}, Token: "t", Activity: messages.Activity_idle})
	select {
	case f := <-answers:
		if f.GetStateSync().GetNonce() != "n0nce" || f.GetStateSync().GetActivity() != messages.Activity_idle {
			t.Fatalf("answer %v", f)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no state_sync")
	}
	select {
	case <-s.Done():
		if !errors.Is(s.Err(), client.ErrReauthenticate) {
			t.Fatalf("ended with %v, want ErrReauthenticate", s.Err())
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the session did not end after 4409")
	}
}
