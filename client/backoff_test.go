package client_test

import (
	"context"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/presence-im/presence/client"
	"github.com/presence-im/presence/internal/poll"
)

// closingNode answers every handshake with hello (heartbeats every interval)
// and hands the n-th connection (from 1) to serve; it records when each
// dial came and when serve returned.
type closingNode struct {
	mu            sync.Mutex
	dials, closes []time.Time
}

func startClosingNode(t *testing.T, interval time.Duration, serve func(ctx context.Context, ws *websocket.Conn, n int)) (*closingNode, string) {
	t.Helper()
	f := &closingNode{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{client.ProtoJSON}})
		if err != nil {
			return
		}
		defer ws.CloseNow()
		f.mu.Lock()
		f.dials = append(f.dials, time.Now())
		n := len(f.dials)
		f.mu.Unlock()
		hello := `{"hello":{"conn_id":"c","node":"fake","heartbeat_interval_ms":` + strconv.FormatInt(interval.Milliseconds(), 10) + `}}`
		if ws.Write(r.Context(), websocket.MessageText, []byte(hello)) != nil {
			return
		}
		serve(r.Context(), ws, n)
		f.mu.Lock()
		f.closes = append(f.closes, time.Now())
		f.mu.Unlock()
	}))
	t.Cleanup(func() { srv.CloseClientConnections(); srv.Close() })
	return f, "ws" + strings.TrimPrefix(srv.URL, "http") + "/ws"
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
// after one that did (a heartbeat acked).
func TestSessionBacksOffFromConnectionsClosedAtOnce(t *testing.T) {
	const minWait = 20 * time.Millisecond
	f, url := startClosingNode(t, 50*time.Millisecond, func(ctx context.Context, ws *websocket.Conn, n int) {
		if n == 6 { // healthy: its first heartbeat acked, then closed
			if _, _, err := ws.Read(ctx); err != nil {
				return
			}
			_ = ws.Write(ctx, websocket.MessageText, []byte(`{"heartbeat_ack":{"seq":"1"}}`))
			time.Sleep(10 * time.Millisecond) // the ack before the close
		}
		ws.Close(websocket.StatusProtocolError, "a frame it refuses")
	})
	ctx, cancel := context.WithCancel(context.Background())
	s := client.Start(ctx, client.Config{URLs: []string{url}, Token: "t", BackoffMin: minWait, BackoffMax: 5 * time.Second, Rand: rand.New(top{})})
	defer func() { cancel(); <-s.Done() }()
	poll.Until(t, 10*time.Second, 10*time.Millisecond, "seven dials", func() bool { d, _ := f.times(); return len(d) >= 7 })
	dials, closes := f.times()
	for i := 1; i < 6; i++ {
		want := minWait << (i - 1)
		if wait := dials[i].Sub(closes[i-1]); wait < want-2*time.Millisecond || wait > want+150*time.Millisecond {
			t.Errorf("dial %d came %v after the close before it, want the back-off, %v", i+1, wait, want)
		}
	}
	if wait := dials[6].Sub(closes[5]); wait > minWait+150*time.Millisecond {
		t.Errorf("after a healthy connection the next dial came %v after its close, want the least back-off, %v", wait, minWait)
	}
}
