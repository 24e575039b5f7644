package client_test

import (
	"bufio"
	"context"
	"errors"
	"math/rand/v2"
	"net"
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/coder/websocket"
	"github.com/presence-im/presence/client"
	"github.com/presence-im/presence/messages"
	"google.golang.org/protobuf/encoding/protojson"
)

// memNodes are fake nodes on in-memory pipes, so that a Session runs in
// virtual time (testing/synctest): each answers a handshake to its host
// with a hello of interval, reads every frame and keeps the heartbeats, and
// acks them rtt later as the node does (only those that do not say ack
// false), or every one as a node before the field (everyBeat).
type memNodes struct {
	interval  time.Duration
	rtt       time.Duration
	everyBeat bool

	mu      sync.Mutex
	beats   []memBeat
	dialed  map[string]time.Time // host -> its last handshake
	wrote   time.Time            // the last frame any node wrote
	mute    map[string]bool      // hosts that write nothing more, a dead node as a device sees it
	closers []func()
	conns   []memConn
}

type memConn struct {
	host string
	ws   *websocket.Conn
}

// memBeat is a heartbeat a fake node read: its seq, its ack field (nil:
// absent) and when.
type memBeat struct {
	seq uint64
	ack *bool
	at  time.Time
}

func newMemNodes(interval, rtt time.Duration) *memNodes {
	return &memNodes{interval: interval, rtt: rtt, dialed: map[string]time.Time{}, mute: map[string]bool{}}
}

// session starts a session on the fake nodes a and b; the test ends it.
func (n *memNodes) session(ctx context.Context) *client.Session {
	return client.Start(ctx, client.Config{URLs: []string{"ws://a/ws", "ws://b/ws"}, Token: "t",
		HTTPClient: &http.Client{Transport: n}, Rand: rand.New(rand.NewPCG(1, 2))})
}

// RoundTrip is a handshake on a pipe (pipeRoundTrip).
func (n *memNodes) RoundTrip(req *http.Request) (*http.Response, error) {
	host := req.URL.Host
	cli, srv := net.Pipe()
	n.mu.Lock()
	n.dialed[host] = time.Now()
	n.closers = append(n.closers, func() { cli.Close(); srv.Close() })
	n.mu.Unlock()
	return pipeRoundTrip(req, cli, srv, func(w *hijacked) {
		ws, err := websocket.Accept(w, req, &websocket.AcceptOptions{Subprotocols: []string{client.ProtoJSON}})
		if err != nil {
			return
		}
		n.serve(host, ws)
	}), nil
}

// pipeRoundTrip answers a handshake on an in-memory pipe, so that a fake
// node runs in virtual time: accept runs on the server end srv (it calls
// websocket.Accept on w, which hijacks that end), and the 101 comes back
// with the client end cli as its body. The caller closes both ends; srv is
// also closed when accept returns without hijacking it.
func pipeRoundTrip(req *http.Request, cli, srv net.Conn, accept func(w *hijacked)) *http.Response {
	w := &hijacked{header: http.Header{}, conn: srv, status: make(chan int, 1)}
	go func() {
		accept(w)
		if w.conn != nil {
			srv.Close()
		}
	}()
	return &http.Response{StatusCode: <-w.status, Header: w.header, Body: cli, Request: req, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1}
}

func (n *memNodes) serve(host string, ws *websocket.Conn) {
	ctx := context.Background()
	n.mu.Lock()
	n.conns = append(n.conns, memConn{host, ws})
	n.mu.Unlock()
	n.write(ctx, host, ws, &messages.Frame{Kind: &messages.Frame_Hello{Hello: &messages.Hello{
		Node: host, HeartbeatIntervalMs: uint32(n.interval.Milliseconds())}}})
	for {
		_, b, err := ws.Read(ctx)
		if err != nil {
			return
		}
		f := &messages.Frame{}
		if protojson.Unmarshal(b, f) != nil || f.GetHeartbeat() == nil {
			continue
		}
		hb := f.GetHeartbeat()
		n.mu.Lock()
		n.beats = append(n.beats, memBeat{hb.GetSeq(), hb.Ack, time.Now()})
		n.mu.Unlock()
		if hb.Ack != nil && !*hb.Ack && !n.everyBeat {
			continue
		}
		ack := &messages.Frame{Kind: &messages.Frame_HeartbeatAck{HeartbeatAck: &messages.HeartbeatAck{
			Seq: hb.GetSeq(), ClientTsMs: hb.GetClientTsMs(), ServerTsMs: time.Now().UnixMilli()}}}
		time.AfterFunc(n.rtt, func() { n.write(ctx, host, ws, ack) })
	}
}

// write sends f unless host is mute.
func (n *memNodes) write(ctx context.Context, host string, ws *websocket.Conn, f *messages.Frame) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.mute[host] {
		return
	}
	b, _ := protojson.MarshalOptions{UseProtoNames: true}.Marshal(f)
	if ws.Write(ctx, websocket.MessageText, b) == nil {
		n.wrote = time.Now()
	}
}

// pushAll writes a frame that is no ack (a presence) on every connection:
// the session hears something other than an ack.
func (n *memNodes) pushAll(ctx context.Context) {
	n.mu.Lock()
	conns := append([]memConn(nil), n.conns...)
	n.mu.Unlock()
	for _, c := range conns {
		n.write(ctx, c.host, c.ws, &messages.Frame{Kind: &messages.Frame_Presence{Presence: &messages.Presence{User: "dave"}}})
	}
}

func (n *memNodes) close() {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, c := range n.closers {
		c()
	}
}

func (n *memNodes) heartbeats() []memBeat {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]memBeat(nil), n.beats...)
}

// hijacked is the server side of a handshake on a pipe.
type hijacked struct {
	header http.Header
	conn   net.Conn
	status chan int
}

func (h *hijacked) Header() http.Header         { return h.header }
func (h *hijacked) Write(b []byte) (int, error) { return len(b), nil }
func (h *hijacked) WriteHeader(code int)        { h.status <- code }
func (h *hijacked) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	if h.conn == nil {
		return nil, nil, errors.New("hijacked twice")
	}
	c := h.conn
	h.conn = nil
	return c, bufio.NewReadWriter(bufio.NewReader(c), bufio.NewWriter(c)), nil
}

// asks is the ack field of each heartbeat: 'a' asked, '-' asked for none,
// '?' absent.
func asks(beats []memBeat) string {
	b := make([]byte, len(beats))
	for i, h := range beats {
		switch {
		case h.ack == nil:
			b[i] = '?'
		case *h.ack:
			b[i] = 'a'
		default:
			b[i] = '-'
		}
	}
	return string(b)
}

// An idle session asks for an ack on its first heartbeat and then on
// every other one (the one after an unanswered heartbeat has heard
// nothing for over an interval); each answer gives an RTT sample; the
// connection, hearing nothing between acks for up to two intervals and
// their round trip, is never taken for silent.
func TestSessionAsksForEveryOtherAckWhenIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newMemNodes(30*time.Second, 2*time.Second)
		defer n.close()
		ctx, cancel := context.WithCancel(context.Background())
		s := n.session(ctx)
		time.Sleep(30 * 30 * time.Second)
		beats := n.heartbeats()
		if got := asks(beats); len(got) < 30 || got[:8] != "a-a-a-a-" || got[len(got)-4:] != "a-a-" && got[len(got)-4:] != "-a-a" {
			t.Errorf("heartbeats asked %q, want a first ask, then every other one", got)
		}
		for i := 2; i < len(beats); i += 2 {
			if beats[i].ack == nil || !*beats[i].ack {
				t.Errorf("heartbeat %d (seq %d) did not ask: %q", i, beats[i].seq, asks(beats))
				break
			}
		}
		if s.Connections() != 1 {
			t.Errorf("%d connections, want 1: the session took a live idle node for silent", s.Connections())
		}
		if s.RTT() != 2*time.Second {
			t.Errorf("RTT %v, want the node's 2 s", s.RTT())
		}
		cancel()
		<-s.Done()
	})
}

// A session that hears other frames asks only every AskEvery-th heartbeat
// (an RTT sample); against a node before the field, which acks every
// heartbeat, too, and the connection stays.
func TestSessionAsksEveryTenthWhenHearing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newMemNodes(30*time.Second, time.Second)
		n.everyBeat = true
		defer n.close()
		ctx, cancel := context.WithCancel(context.Background())
		s := n.session(ctx)
		time.Sleep(25 * 30 * time.Second)
		got := asks(n.heartbeats())
		if want := "a---------a---------a"; len(got) < len(want) || got[:len(want)] != want {
			t.Errorf("heartbeats asked %q, want every %dth (from the first) only", got, client.AskEvery)
		}
		if s.Connections() != 1 {
			t.Errorf("%d connections, want 1", s.Connections())
		}
		cancel()
		<-s.Done()
	})
}

// The sparse asks never let a live connection go silent, whenever other
// frames come: a frame heard just before a heartbeat that then does not
// ask is the worst case (the next one asks up to two intervals after the
// frame), and an ack that takes up to just under half an interval still
// comes within Silence (2.5 intervals).
func TestSessionSparseAcksNeverSilenceALiveNode(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const interval = 30 * time.Second
		n := newMemNodes(interval, interval*45/100)
		defer n.close()
		ctx, cancel := context.WithCancel(context.Background())
		s := n.session(ctx)
		r := rand.New(rand.NewPCG(3, 4))
		for range 200 {
			time.Sleep(time.Duration(r.Int64N(int64(3 * interval))))
			n.pushAll(ctx)
		}
		if s.Connections() != 1 {
			t.Errorf("%d connections, want 1: a live node taken for silent (asks %q)", s.Connections(), asks(n.heartbeats()))
		}
		cancel()
		<-s.Done()
	})
}

// A node that dies without closing (it writes nothing more) is still left
// for the next URL Silence (2.5 intervals) after the last frame it wrote,
// not later; meanwhile every heartbeat sent after an interval of hearing
// nothing asks for an ack.
func TestSessionLeavesADeadNodeWithinSilence(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const interval = 30 * time.Second
		n := newMemNodes(interval, time.Second)
		defer n.close()
		ctx, cancel := context.WithCancel(context.Background())
		s := n.session(ctx)
		time.Sleep(10*interval + 7*time.Second)
		n.mu.Lock()
		n.mute["a"] = true
		last := n.wrote
		n.mu.Unlock()
		time.Sleep(5 * interval)
		n.mu.Lock()
		moved := n.dialed["b"]
		n.mu.Unlock()
		if moved.IsZero() || moved.Sub(last) != 5*interval/2 {
			t.Errorf("moved to b %v after a's last frame, want Silence, %v", moved.Sub(last), 5*interval/2)
		}
		for _, b := range n.heartbeats() {
			if b.at.Sub(last) > interval && b.at.Before(moved) && (b.ack == nil || !*b.ack) {
				t.Errorf("heartbeat %d, %v after a's last frame, did not ask for an ack", b.seq, b.at.Sub(last))
			}
		}
		if s.Hello().GetNode() != "b" {
			t.Errorf("on %q, want b", s.Hello().GetNode())
		}
		cancel()
		<-s.Done()
	})
}
