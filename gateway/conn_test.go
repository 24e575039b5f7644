package gateway

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/presence-im/presence/actors"
	"github.com/presence-im/presence/client"
	"github.com/presence-im/presence/messages"
)

// Seed 003 "connect owns the route": the route's connection is hello's.
func TestConnectOwnsRoute(t *testing.T) {
	nd := startNode(t)
	c := nd.dial("alice", "phone", 1)
	d := nd.route("alice")
	if len(d) != 1 || d[0].ConnId != c.Hello.GetConnId() || d[0].Node != "n1" || d[0].Epoch != 1 {
		t.Fatalf("route = %v, want hello's conn %s", d, c.Hello.GetConnId())
	}
	if c.Hello.GetHeartbeatIntervalMs() != uint32(nd.timing.Heartbeat.Milliseconds()) || c.Hello.GetUser() != "alice" {
		t.Fatalf("hello = %v", c.Hello)
	}
}

// Seed 003: a client that only answers pings, or only pings (no heartbeat
// frames), stays connected well beyond the stale threshold.
func TestPingsKeepConnectionAlive(t *testing.T) {
	nd := startNode(t)
	c := nd.dial("alice", "phone", 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { // coder/websocket needs a reader for pongs to arrive
		for {
			if _, err := c.Next(ctx); err != nil {
				return
			}
		}
	}()
	end := time.Now().Add(3 * nd.timing.Stale)
	for time.Now().Before(end) {
		pctx, pcancel := context.WithTimeout(ctx, time.Second)
		err := c.Ping(pctx)
		pcancel()
		if err != nil {
			t.Fatalf("ping: %v", err)
		}
		time.Sleep(nd.timing.Heartbeat)
	}
	if d := nd.route("alice"); len(d) != 1 {
		t.Fatalf("route after %v of pings only = %v, want the connection", 3*nd.timing.Stale, d)
	}
}

// Seed 003: a client frame without a mask is closed with 1002 (RFC 6455
// §5.1), and its lease released.
func TestUnmaskedFrameClosed1002(t *testing.T) {
	nd := startNode(t)
	conn, err := net.Dial("tcp", nd.srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "GET /ws?attempt=1 HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"+
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\nAuthorization: Bearer %s\r\n\r\n", nd.token("alice", "phone"))
	r := bufio.NewReader(conn)
	res, err := http.ReadResponse(r, nil)
	if err != nil || res.StatusCode != 101 {
		t.Fatalf("handshake: %v %v", res, err)
	}
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	if op, _ := readFrame(t, r); op != 1 {
		t.Fatalf("first frame opcode %d, want text (hello)", op)
	}
	payload := []byte(`{"heartbeat":{"seq":1}}`)
	if _, err := conn.Write(append([]byte{0x81, byte(len(payload))}, payload...)); err != nil { // FIN+text, no mask bit
		t.Fatal(err)
	}
	for {
		op, body := readFrame(t, r)
		if op == 8 {
			if code := binary.BigEndian.Uint16(body); code != 1002 {
				t.Fatalf("close code %d, want 1002", code)
			}
			break
		}
	}
	eventually(t, 2*time.Second, "lease released", func() bool { return len(nd.route("alice")) == 0 })
}

// readFrame reads one unmasked server frame (test-only framing).
func readFrame(t *testing.T, r *bufio.Reader) (byte, []byte) {
	t.Helper()
	var h [2]byte
	if _, err := r.Read(h[:1]); err != nil {
		t.Fatalf("read: %v", err)
	}
	if _, err := r.Read(h[1:]); err != nil {
		t.Fatalf("read: %v", err)
	}
	n := int(h[1] & 0x7f)
	switch n {
	case 126:
		var l [2]byte
		_, _ = r.Read(l[:1])
		_, _ = r.Read(l[1:])
		n = int(binary.BigEndian.Uint16(l[:]))
	case 127:
		t.Fatal("unexpected 64-bit frame")
	}
	body := make([]byte, n)
	for i := 0; i < n; {
		k, err := r.Read(body[i:])
		if err != nil {
			t.Fatalf("read body: %v", err)
		}
		i += k
	}
	return h[0] & 0x0f, body
}

// Seed 003: a half-open client (it stops sending and reading, the socket
// stays open) loses its route after stale + check.
func TestHalfOpenClientReleased(t *testing.T) {
	nd := startNode(t)
	start := time.Now()          // before the connection's last sign of life
	nd.dial("alice", "phone", 1) // sends nothing after the handshake
	eventually(t, nd.timing.Stale+nd.timing.Check+time.Second, "route released", func() bool { return len(nd.route("alice")) == 0 })
	if el := time.Since(start); el < nd.timing.Stale {
		t.Fatalf("released after %v, before stale %v: a live connection could be dropped", el, nd.timing.Stale)
	}
}

// Seed 003 takeover rows: a newer connection of the device supersedes the
// old (4001); the old one's close keeps the new route; the new connection
// receives later events.
func TestTakeoverKeepsNewRoute(t *testing.T) {
	nd := startNode(t)
	nd.policy("dave", "alice")
	old := nd.dial("alice", "phone", 1)
	cur := nd.dial("alice", "phone", 2)
	if code := closeCode(t, old, 2*time.Second); code != int(messages.CloseSuperseded) {
		t.Fatalf("old connection closed with %d, want 4001", code)
	}
	time.Sleep(100 * time.Millisecond) // let the old close reach the server
	if d := nd.route("alice"); len(d) != 1 || d[0].ConnId != cur.Hello.GetConnId() {
		t.Fatalf("route = %v, want the new connection %s", d, cur.Hello.GetConnId())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := cur.Subscribe(ctx, "s1", "dave"); err != nil {
		t.Fatal(err)
	}
	next(t, cur, 2*time.Second, func(f *messages.Frame) bool { return f.GetSnapshot() != nil })
	nd.dial("dave", "laptop", 1)
	p := next(t, cur, 2*time.Second, func(f *messages.Frame) bool { return f.GetPresence() != nil }).GetPresence()
	if p.GetUser() != "dave" || p.GetStatus() != messages.Status_online {
		t.Fatalf("event = %v, want dave online", p)
	}
}

// Both subprotocols carry the same Frame: binary frames for
// presence.v1.proto.
func TestBinarySubprotocol(t *testing.T) {
	nd := startNode(t)
	nd.policy("dave", "alice")
	nd.dial("dave", "laptop", 1)
	c := nd.dial("alice", "phone", 1, client.ProtoBinary)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Subscribe(ctx, "s1", "dave", "nobody"); err != nil {
		t.Fatal(err)
	}
	snap := next(t, c, 2*time.Second, func(f *messages.Frame) bool { return f.GetSnapshot() != nil }).GetSnapshot()
	if len(snap.GetPresences()) != 1 || snap.GetPresences()[0].GetStatus() != messages.Status_online {
		t.Fatalf("snapshot = %v, want dave online only (nobody is invisible, not offline)", snap)
	}
	if err := c.Heartbeat(ctx, 7); err != nil {
		t.Fatal(err)
	}
	ack := next(t, c, 2*time.Second, func(f *messages.Frame) bool { return f.GetHeartbeatAck() != nil }).GetHeartbeatAck()
	if ack.GetSeq() != 7 || ack.GetServerTsMs() == 0 {
		t.Fatalf("ack = %v", ack)
	}
}

// Protocol errors: a binary frame on the JSON subprotocol is 1003; a message
// over 64 KiB is 1009; undecodable frames get error frames, then 1002.
func TestProtocolErrors(t *testing.T) {
	nd := startNode(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	c := nd.dial("alice", "phone", 1)
	_ = c.SendRaw(ctx, true, []byte{1, 2, 3})
	if code := closeCode(t, c, 2*time.Second); code != int(messages.CloseWrongType) {
		t.Fatalf("binary on json: close %d, want 1003", code)
	}

	c = nd.dial("alice", "phone", 2)
	_ = c.SendRaw(ctx, false, []byte(`{"heartbeat":{"seq":1},"pad":"`+strings.Repeat("x", 70<<10)+`"}`))
	if code := closeCode(t, c, 2*time.Second); code != 1009 {
		t.Fatalf("oversize: close %d, want 1009", code)
	}

	c = nd.dial("alice", "phone", 3)
	for range 3 {
		_ = c.SendRaw(ctx, false, []byte(`{not json`))
	}
	errs := 0
	for {
		f, err := c.Next(ctx)
		if err != nil {
			if code := client.CloseCode(err); code != int(messages.CloseProtocolError) || errs != 2 {
				t.Fatalf("undecodable: close %d after %d error frames, want 1002 after 2", code, errs)
			}
			break
		}
		if f.GetError() != nil {
			errs++
		}
	}
}

// Seed 003 backpressure: a receiver that stops reading, with a small
// receive buffer, never blocks the senders (another subscriber gets every
// event), is cut with 4008 with a bounded outbox, and recovers the latest
// state by resubscribing.
func TestSlowReceiverCut4008AndRecovers(t *testing.T) {
	nd := startNode(t, func(o *Options, _ *actors.Deps) { o.CloseGrace, o.SendBuffer = 3*time.Second, 8192 })
	nd.policy("alice", "bob", "carol")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	bob := nd.dialSlow(ctx, "bob")
	carol := nd.dial("carol", "phone", 1)
	alice := nd.dial("alice", "phone", 1)
	for _, c := range []*client.Conn{bob, carol} {
		_ = c.Subscribe(ctx, "s1", "alice")
	}
	next(t, carol, 2*time.Second, func(f *messages.Frame) bool { return f.GetSnapshot() != nil })
	for _, c := range []*client.Conn{alice, bob, carol} {
		nd.keepAlive(ctx, c)
	}
	// carol reads all along; bob reads nothing but stays alive.
	var carolGot atomic.Int64
	go func() {
		for {
			f, err := carol.Next(ctx)
			if err != nil {
				return
			}
			if f.GetPresence().GetUser() == "alice" {
				carolGot.Add(1)
			}
		}
	}()
	// alice flips her show until bob's outbox overflows and his lease goes.
	shows := []messages.Show{messages.Show_away, messages.Show_dnd}
	flips := 0
	for ; flips < 100000 && (flips%20 != 0 || len(nd.route("bob")) > 0); flips++ {
		if err := alice.SetStatus(ctx, shows[flips%2]); err != nil {
			t.Fatal(err)
		}
		if flips%10 == 9 {
			time.Sleep(time.Millisecond) // a rate a reading subscriber keeps up with
		}
	}
	// bob reads again inside the close grace: what the kernel held, then 4008.
	if code := closeCode(t, bob, 5*time.Second); code != int(messages.CloseOverflow) {
		t.Fatalf("slow receiver closed with %d, want 4008", code)
	}
	// Every flip reached carol: the stuck receiver blocked no sender.
	eventually(t, 10*time.Second, fmt.Sprintf("carol got all %d flips", flips), func() bool { return carolGot.Load() == int64(flips) })
	again := nd.dial("bob", "phone", 2)
	_ = again.Subscribe(ctx, "s2", "alice")
	snap := next(t, again, 2*time.Second, func(f *messages.Frame) bool { return f.GetSnapshot() != nil }).GetSnapshot()
	if len(snap.GetPresences()) != 1 || snap.GetPresences()[0].GetShow() != shows[(flips-1)%2] {
		t.Fatalf("resubscribed snapshot = %v, want alice with her last show %v", snap, shows[(flips-1)%2])
	}
	t.Logf("bob cut after %d flips", flips)
}

// A peer that stops reading while the kernel buffers are full is cut by the
// write deadline even when no new event overflows its outbox.
func TestWriteDeadlineCutsStuckPeer(t *testing.T) {
	nd := startNode(t, func(o *Options, _ *actors.Deps) {
		o.Outbox, o.WriteTimeout, o.SendBuffer = 100000, 300*time.Millisecond, 4096
	})
	nd.policy("alice", "bob")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	bob := nd.dialSlow(ctx, "bob")
	alice := nd.dial("alice", "phone", 1)
	nd.keepAlive(ctx, alice)
	nd.keepAlive(ctx, bob)
	_ = bob.Subscribe(ctx, "s1", "alice")
	shows := []messages.Show{messages.Show_away, messages.Show_dnd}
	for i := range 2000 { // far more than the kernel holds, far less than the outbox
		_ = alice.SetStatus(ctx, shows[i%2])
	}
	eventually(t, 5*time.Second, "stuck peer cut by the write deadline", func() bool { return len(nd.route("bob")) == 0 })
}

// smallReceiver is an HTTP client whose sockets have a 2 KiB receive buffer.
func smallReceiver() *http.Client {
	return &http.Client{Transport: &http.Transport{DialContext: (&net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		return rc.Control(func(fd uintptr) { _ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 2048) })
	}}).DialContext}}
}

// dialSlow connects user's phone through a smallReceiver: a device that
// reads slowly. It is closed at the end of the test.
func (nd *node) dialSlow(ctx context.Context, user string) *client.Conn {
	nd.t.Helper()
	c, err := client.Dial(ctx, nd.url(), client.DialOptions{Token: nd.token(user, "phone"), Attempt: 1, HTTPClient: smallReceiver()})
	if err != nil {
		nd.t.Fatal(err)
	}
	nd.t.Cleanup(func() { _ = c.CloseNow() })
	return c
}

// A read deadline left on an upgraded connection (nbio's accept path can
// set one after the handshake cleared it: clearReadDeadline) is dropped by
// the device's next frame: the connection outlives it and is not cut
// without a close frame.
func TestStrayReadDeadlineDoesNotCut(t *testing.T) {
	nd := startNode(t)
	c := nd.dial("alice", "phone", 1)
	nd.srv.mu.Lock()
	for sock := range nd.srv.live {
		sock.mu.Lock()
		_ = nbioConn(sock.ws).SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		sock.mu.Unlock()
	}
	nd.srv.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Heartbeat(ctx, 1); err != nil {
		t.Fatal(err)
	}
	next(t, c, time.Second, func(f *messages.Frame) bool { return f.GetHeartbeatAck() != nil })
	time.Sleep(400 * time.Millisecond) // past the stray deadline, within stale (750 ms)
	if err := c.Heartbeat(ctx, 2); err != nil {
		t.Fatal(err)
	}
	f := next(t, c, time.Second, func(f *messages.Frame) bool { return f.GetHeartbeatAck() != nil })
	if f.GetHeartbeatAck().GetSeq() != 2 {
		t.Fatalf("ack %v, want seq 2", f)
	}
}
