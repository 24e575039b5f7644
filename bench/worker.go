package bench

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/presence-im/presence/client"
	"github.com/presence-im/presence/gateway"
	"github.com/presence-im/presence/messages"
)

// WorkerOptions configure one load process: Count device connections of
// users Prefix+First... from the source address Src.
type WorkerOptions struct {
	URL         string // ws://host:port/ws
	Src         string // local IP to dial from (127.0.0.x)
	Secret      string
	Prefix      string
	Device      string // the device name of every connection; "": d
	First       int
	Count       int
	Concurrency int           // dials in flight
	Interval    time.Duration // heartbeat period of every connection
	Binary      bool          // presence.v1.proto instead of presence.v1.json
	CPUProfile  string        // file for the CPU profile of the connect phase; "": none
	Centrifugo  bool          // URL is Centrifugo's /connection/websocket: its JSON protocol (centrifugo_worker.go)
	// AckEvery sends heartbeats without the ack field, each acked, as
	// before the field; the default asks for acks as the SDKs do (beat).
	AckEvery bool
}

// worker holds its connections and answers the orchestrator's commands, one
// per line on its input, one answer line each on its output (see
// runCommand). "progress N" lines report the connect phase.
type worker struct {
	o   WorkerOptions
	hc  *http.Client
	tok gateway.Tokens

	outMu sync.Mutex
	out   *bufio.Writer

	mu         sync.Mutex
	conns      []*wconn
	target     *wconn
	targetUser string
	recv       []int64 // receive times (Unix ns) of the target's offline events
	codes      map[int]int
	firstErrs  []string

	acks, sent, unexpected atomic.Int64
	// wrote and readB are the bytes of every connection's socket, each
	// way, WebSocket frames and handshakes (countedConn): over the idle
	// window, a heartbeat's and its answer's bytes on the wire.
	wrote, readB atomic.Int64

	storm atomic.Pointer[stormState] // the storm bench's (storm_worker.go); nil otherwise
}

type wconn struct {
	c       *client.Conn
	user    string
	closing atomic.Bool
	snap    chan struct{}
}

func newWorker(o WorkerOptions, out io.Writer) *worker {
	d := &net.Dialer{Timeout: 10 * time.Second}
	if o.Src != "" {
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(o.Src)}
	}
	w := &worker{o: o, tok: gateway.Tokens{Key: []byte(o.Secret)}, out: bufio.NewWriter(out), codes: map[int]int{}}
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &countedConn{Conn: c, w: w}, nil
	}
	w.hc = &http.Client{Transport: &http.Transport{DialContext: dial, MaxIdleConns: -1}}
	return w
}

// countedConn counts what its socket writes and reads into its worker's
// totals.
type countedConn struct {
	net.Conn
	w *worker
}

func (c *countedConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	c.w.wrote.Add(int64(n))
	return n, err
}

func (c *countedConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.w.readB.Add(int64(n))
	return n, err
}

func (w *worker) say(format string, args ...any) {
	w.outMu.Lock()
	defer w.outMu.Unlock()
	fmt.Fprintf(w.out, format+"\n", args...)
	w.out.Flush()
}

// RunWorker connects, then serves commands from in until "quit" or EOF.
func RunWorker(ctx context.Context, o WorkerOptions, in io.Reader, out io.Writer) error {
	w := newWorker(o, out)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if o.Centrifugo {
		return runCentrifugoWorker(ctx, w, in)
	}
	if err := w.profiled(func() { w.connectAll(ctx) }); err != nil {
		return err
	}
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		if !w.runCommand(ctx, w, strings.Fields(sc.Text())) {
			break
		}
	}
	w.closeAll()
	return nil
}

// profiled runs f under a CPU profile written to CPUProfile, if set.
func (w *worker) profiled(f func()) error {
	if w.o.CPUProfile == "" {
		f()
		return nil
	}
	out, err := os.Create(w.o.CPUProfile)
	if err != nil {
		return err
	}
	defer out.Close()
	if err := pprof.StartCPUProfile(out); err != nil {
		return err
	}
	f()
	pprof.StopCPUProfile()
	return nil
}

// connectAll dials Count connections, Concurrency at a time, and says
// "connected N ERRORS START_NS END_NS".
func (w *worker) connectAll(ctx context.Context) {
	w.conns = dialEach(ctx, w, w.dial)
}

// dialEach dials Count devices with dial, Concurrency at a time, showing
// progress, and says "connected N ERRORS START_NS END_NS"; the i-th is at
// i, the user numbers' order (sub takes the first K users), nil where its
// dial failed.
func dialEach[C any](ctx context.Context, w *worker, dial func(context.Context, string) (*C, error)) []*C {
	var next, done, errs atomic.Int64
	start := time.Now()
	conns := make([]*C, w.o.Count)
	stop := make(chan struct{})
	go w.progress(&done, stop)
	var wg sync.WaitGroup
	for range max(w.o.Concurrency, 1) {
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < w.o.Count; i = int(next.Add(1)) - 1 {
				c, err := dial(ctx, fmt.Sprintf("%s%06d", w.o.Prefix, w.o.First+i))
				if err != nil {
					errs.Add(1)
					continue
				}
				w.mu.Lock()
				conns[i] = c
				w.mu.Unlock()
				done.Add(1)
			}
		})
	}
	wg.Wait()
	end := time.Now()
	close(stop)
	w.say("connected %d %d %d %d", done.Load(), errs.Load(), start.UnixNano(), end.UnixNano())
	return conns
}

func (w *worker) progress(done *atomic.Int64, stop chan struct{}) {
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			w.say("progress %d", done.Load())
		}
	}
}

// dial opens one heartbeating device connection. A refused handshake
// (429, 503) is retried as the SDKs do, after the server's Retry-After and
// a back-off, for up to dialPatience; another failure a few times.
func (w *worker) dial(ctx context.Context, user string) (*wconn, error) {
	tok, err := w.tok.Mint(user, cmp.Or(w.o.Device, "d"), 24*time.Hour)
	if err != nil {
		return nil, err
	}
	sub := client.ProtoJSON
	if w.o.Binary {
		sub = client.ProtoBinary
	}
	var c *client.Conn
	give := time.Now().Add(dialPatience)
	for try := 0; ; try++ {
		dctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		c, err = client.Dial(dctx, w.o.URL, client.DialOptions{Token: tok, Attempt: uint64(time.Now().UnixMicro()),
			Subprotocol: sub, HTTPClient: w.hc})
		cancel()
		wait, again := dialRetry(err, try, give)
		if !again || ctx.Err() != nil {
			break
		}
		time.Sleep(wait)
	}
	if err != nil {
		w.noteErr("dial " + user + ": " + err.Error())
		return nil, err
	}
	wc := &wconn{c: c, user: user, snap: make(chan struct{}, 4)}
	go w.read(ctx, wc)
	go w.beat(ctx, wc)
	return wc, nil
}

// dialPatience is how long a device keeps retrying refused handshakes: a
// login wave may meet the node's handshake rate limit for a while.
const dialPatience = time.Minute

// dialRetry says whether to dial again after err (the try-th), and after
// how long: a refusal until give, with the server's Retry-After and a
// growing, jittered back-off; another failure five times in all.
func dialRetry(err error, try int, give time.Time) (time.Duration, bool) {
	if err == nil {
		return 0, false
	}
	back := time.Duration(min(try+1, 10)) * 100 * time.Millisecond
	var he *client.HandshakeError
	if errors.As(err, &he) && (he.Status == http.StatusTooManyRequests || he.Status == http.StatusServiceUnavailable) {
		wait := max(he.RetryAfter, back) + rand.N(back)
		return wait, time.Now().Add(wait).Before(give)
	}
	return back, try < 4
}

func (w *worker) noteErr(s string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.firstErrs) < 5 {
		w.firstErrs = append(w.firstErrs, s)
	}
}

// beat heartbeats every Interval, starting at a random phase so that the
// node sees a steady rate, each asking for an ack as the SDKs' AckPolicy
// says (unless AckEvery).
func (w *worker) beat(ctx context.Context, wc *wconn) {
	t := time.NewTimer(rand.N(w.o.Interval))
	defer t.Stop()
	asks := benchAckPolicy(w.o.Interval)
	for seq := uint64(1); ; seq++ {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if wc.closing.Load() || w.heartbeat(ctx, wc, seq, &asks) != nil {
			return
		}
		w.sent.Add(1)
		t.Reset(w.o.Interval)
	}
}

// benchAckPolicy is the SDKs' rule for a worker's beats. An SDK shortens
// every interval, so the heartbeat after an ack has heard nothing for less
// than one; the worker's beats come a full interval apart plus a timer's
// slack, so the rule counts an interval as a tenth longer (and the
// silence as 2.5 of those): an idle device then asks every other
// heartbeat, as an SDK's does.
func benchAckPolicy(interval time.Duration) client.AckPolicy {
	i := interval * 11 / 10
	return client.AckPolicy{Interval: i, Silence: i * 5 / 2}
}

// heartbeat sends one heartbeat: with the ack field as asks says, or
// without it (AckEvery).
func (w *worker) heartbeat(ctx context.Context, wc *wconn, seq uint64, asks *client.AckPolicy) error {
	if w.o.AckEvery {
		return wc.c.Heartbeat(ctx, seq)
	}
	return wc.c.HeartbeatAsk(ctx, seq, asks.Ask(time.Since(wc.c.Heard())))
}

// read counts acks, records the target's offline events and counts every
// end of the connection the worker did not ask for, by close code (-1: no
// close frame, e.g. EOF).
func (w *worker) read(ctx context.Context, wc *wconn) {
	for {
		f, at, err := wc.c.NextAt(ctx)
		if err != nil {
			if !wc.closing.Load() && ctx.Err() == nil {
				w.unexpected.Add(1)
				w.mu.Lock()
				w.codes[client.CloseCode(err)]++
				w.mu.Unlock()
				w.noteErr(wc.user + ": " + err.Error())
			}
			w.stormEnded(wc)
			return
		}
		w.stormFrame(ctx, wc, f, at)
		switch k := f.GetKind().(type) {
		case *messages.Frame_HeartbeatAck:
			w.acks.Add(1)
		case *messages.Frame_Snapshot:
			if frameKind(f) != kindSnapshot {
				break // a query's answer or the restored snapshot: not a subscribe's
			}
			select {
			case wc.snap <- struct{}{}:
			default:
			}
		case *messages.Frame_Presence:
			if k.Presence.GetStatus() != messages.Status_online {
				w.mu.Lock()
				if k.Presence.GetUser() == w.targetUser {
					w.recv = append(w.recv, at.UnixNano())
				}
				w.mu.Unlock()
			}
		}
	}
}

// protocol is what a load process does in the protocol it speaks
// (presence's, or Centrifugo's: cfWorker); runCommand drives either.
type protocol interface {
	subscribeAll(ctx context.Context, target string, k int) int // the first k devices subscribe to target
	openTarget(ctx context.Context, user string) error          // the target's own device connects
	closeTarget()                                               // and closes cleanly
	statsLine() string
	closeAll()
	other(ctx context.Context, cmd []string) // any other command
}

// runCommand answers one command in p's protocol; false ends the worker.
func (w *worker) runCommand(ctx context.Context, p protocol, cmd []string) bool {
	if len(cmd) == 0 {
		return true
	}
	switch cmd[0] {
	case "sub":
		w.setTarget(cmd[1])
		k, _ := strconv.Atoi(cmd[2])
		w.say("subscribed %d", p.subscribeAll(ctx, cmd[1], k))
	case "open":
		w.setTarget(cmd[1])
		if err := p.openTarget(ctx, cmd[1]); err != nil {
			w.say("error %v", err)
			return true
		}
		w.say("opened")
	case "close":
		t0 := time.Now()
		p.closeTarget()
		w.say("closed %d", t0.UnixNano())
	case "lat":
		w.say("lat %s", w.takeLatencies())
	case "stats":
		w.say("stats %s", p.statsLine())
	case "drop":
		t0 := time.Now()
		p.closeAll()
		w.say("dropped %d", t0.UnixNano())
	case "quit":
		return false
	default:
		p.other(ctx, cmd)
	}
	return true
}

func (w *worker) setTarget(user string) {
	w.mu.Lock()
	w.targetUser = user
	w.mu.Unlock()
}

func (w *worker) subscribeAll(ctx context.Context, target string, k int) int {
	return w.subscribe(ctx, target, k)
}

func (w *worker) openTarget(ctx context.Context, user string) error {
	wc, err := w.dial(ctx, user)
	if err == nil {
		w.target = wc
	}
	return err
}

func (w *worker) closeTarget() {
	w.target.closing.Store(true)
	_ = w.target.c.Close()
}

func (w *worker) other(ctx context.Context, cmd []string) { w.stormCommand(ctx, cmd) }

func (w *worker) subscribe(ctx context.Context, target string, k int) int {
	w.mu.Lock()
	subs := slices.Clone(w.conns[:min(k, len(w.conns))])
	w.mu.Unlock()
	subs = slices.DeleteFunc(subs, func(wc *wconn) bool { return wc == nil })
	for _, wc := range subs {
		_ = wc.c.Subscribe(ctx, "s", target)
	}
	n := 0
	deadline := time.After(60 * time.Second)
	for _, wc := range subs {
		select {
		case <-wc.snap:
			n++
		case <-deadline:
			return n
		}
	}
	return n
}

func (w *worker) takeLatencies() string {
	w.mu.Lock()
	r := w.recv
	w.recv = nil
	w.mu.Unlock()
	s := make([]string, len(r))
	for i, t := range r {
		s[i] = strconv.FormatInt(t, 10)
	}
	return strconv.Itoa(len(r)) + " " + strings.Join(s, ",")
}

func (w *worker) statsLine() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.stats(w.live())
}

// stats is the answer to "stats" (w.mu held): acks, heartbeats sent,
// unexpected ends, live connections, bytes written and read, close codes,
// the first errors (collectStats reads it).
func (w *worker) stats(live int) string {
	var codes []string
	for c, n := range w.codes {
		codes = append(codes, fmt.Sprintf("%d:%d", c, n))
	}
	slices.Sort(codes)
	return fmt.Sprintf("%d %d %d %d %d %d %s %q", w.acks.Load(), w.sent.Load(), w.unexpected.Load(), live,
		w.wrote.Load(), w.readB.Load(), strings.Join(codes, ",")+",", strings.Join(w.firstErrs, " | "))
}

func (w *worker) closeAll() {
	w.mu.Lock()
	conns := slices.Clone(w.conns)
	w.mu.Unlock()
	for _, wc := range conns {
		if wc == nil {
			continue
		}
		wc.closing.Store(true)
		_ = wc.c.CloseNow()
	}
}

// live counts the connections dialed (w.mu held).
func (w *worker) live() int {
	n := 0
	for _, wc := range w.conns {
		if wc != nil {
			n++
		}
	}
	return n
}
