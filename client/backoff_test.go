package client_test

import (
	"context"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/coder/websocket"
	"github.com/presence-im/presence/client"
)

// closingNode is a fake node on in-memory pipes, so that its test runs in
// virtual time (testing/synctest): it answers every handshake with hello
// (heartbeats every interval) and hands the n-th connection (from 1) to
// serve; it records when each dial came and when serve returned.
type closingNode struct {
	interval time.Duration
	serve    func(ctx context.Context, ws *websocket.Conn, n int)

	mu            sync.Mutex
	dials, closes []time.Time
	pipes         []net.Conn
}

// RoundTrip is a handshake on a pipe (pipeRoundTrip).
func (f *closingNode) RoundTrip(req *http.Request) (*http.Response, error) {
	cli, srv := net.Pipe()
	f.mu.Lock()
	f.pipes = append(f.pipes, cli, srv)
	f.mu.Unlock()
	return pipeRoundTrip(req, cli, srv, func(w *hijacked) { f.handle(w, req) }), nil
}

func (f *closingNode) handle(w *hijacked, req *http.Request) {
	ws, err := websocket.Accept(w, req, &websocket.AcceptOptions{Subprotocols: []string{client.ProtoJSON}})
	if err != nil {
		return
	}
	defer ws.CloseNow()
	ctx := context.Background()
	f.mu.Lock()
	f.dials = append(f.dials, time.Now())
	n := len(f.dials)
	f.mu.Unlock()
	hello := `{"hello":{"conn_id":"c","node":"fake","heartbeat_interval_ms":` + strconv.FormatInt(f.interval.Milliseconds(), 10) + `}}`
	if ws.Write(ctx, websocket.MessageText, []byte(hello)) != nil {
		return
	}
	f.serve(ctx, ws, n)
	f.mu.Lock()
	f.closes = append(f.closes, time.Now())
	f.mu.Unlock()
}

// close ends every pipe, so that no handler outlives its test.
func (f *closingNode) close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, p := range f.pipes {
		p.Close()
	}
}

func (f *closingNode) times() (dials, closes []time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]time.Time(nil), f.dials...), append([]time.Time(nil), f.closes...)
}

// top is a random source whose every draw is the largest: each back-off
// wait is its whole bound.
type top struct{}

func (top) Uint64() uint64 { return math.MaxUint64 }

// A node that closes every connection right after hello (1002, a frame
// it refuses): the session waits the back-off before each dial and the
// back-off doubles, since no connection proved healthy; it starts again
// after one that did (a heartbeat acked). In virtual time a wait is the
// back-off within a nanosecond (the largest draw is just under 1): the
// pipes take no time.
func TestSessionBacksOffFromConnectionsClosedAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const minWait = 20 * time.Millisecond
		f := &closingNode{interval: 50 * time.Millisecond, serve: func(ctx context.Context, ws *websocket.Conn, n int) {
			if n == 6 { // healthy: its first heartbeat acked, then closed
				if _, _, err := ws.Read(ctx); err != nil {
					return
				}
				_ = ws.Write(ctx, websocket.MessageText, []byte(`{"heartbeat_ack":{"seq":"1"}}`))
				time.Sleep(10 * time.Millisecond) // the ack before the close
			}
			ws.Close(websocket.StatusProtocolError, "a frame it refuses")
		}}
		defer f.close()
		ctx, cancel := context.WithCancel(context.Background())
		s := client.Start(ctx, client.Config{URLs: []string{"ws://fake/ws"}, Token: "t", HTTPClient: &http.Client{Transport: f},
			BackoffMin: minWait, BackoffMax: 5 * time.Second, Rand: rand.New(top{})})
		defer func() { cancel(); <-s.Done() }()
		for d, _ := f.times(); len(d) < 7; d, _ = f.times() {
			time.Sleep(time.Millisecond)
		}
		dials, closes := f.times()
		for i := 1; i < 6; i++ {
			if want, wait := minWait<<(i-1), dials[i].Sub(closes[i-1]); !backoff(wait, want) {
				t.Errorf("dial %d came %v after the close before it, want the back-off, %v", i+1, wait, want)
			}
		}
		if wait := dials[6].Sub(closes[5]); !backoff(wait, minWait) {
			t.Errorf("after a healthy connection the next dial came %v after its close, want the least back-off, %v", wait, minWait)
		}
	})
}

// backoff says whether wait is the whole back-off bound, short of it by
// at most a nanosecond's rounding.
func backoff(wait, bound time.Duration) bool { return wait <= bound && wait >= bound-time.Nanosecond }
