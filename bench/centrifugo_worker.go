package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
	"github.com/presence-im/presence/client"
)

// cfConn is one device on Centrifugo: a small raw client of its JSON
// protocol over WebSocket (/connection/websocket). Commands are JSON
// objects with an id; the server answers each with a reply of the same id
// and sends pushes (join, leave) and pings ({}) without one, several to a
// WebSocket message, one a line. A ping is answered with an empty command
// ({}), the pong. Commands may be sent from any goroutine; read runs in
// one.
type cfConn struct {
	ws      *websocket.Conn
	user    string
	closing atomic.Bool
	nextID  atomic.Uint32
	joins   atomic.Int64 // join pushes read
	ended   atomic.Bool  // its reader returned

	mu      sync.Mutex
	waiting map[uint32]chan error // replies awaited, by command id
}

// cfLine is what one line from the server is to the bench.
type cfLine struct {
	ping    bool
	join    bool
	id      uint32 // a reply to command id (0: none)
	err     error  // the reply's error
	channel string // a leave's channel ("": not a leave)
	user    string // a leave's user
}

// parseCFLine reads one line. Joins and other pushes, the bulk of what a
// subscriber gets, are recognised without decoding them.
func parseCFLine(l []byte) (cfLine, error) {
	l = bytes.TrimSpace(l)
	if string(l) == "{}" {
		return cfLine{ping: true}, nil
	}
	isReply := bytes.HasPrefix(l, []byte(`{"id":`))
	if !isReply && !bytes.Contains(l, []byte(`"leave":{`)) {
		return cfLine{join: bytes.Contains(l, []byte(`"join":{`))}, nil
	}
	var m struct {
		ID    uint32 `json:"id"`
		Error *struct {
			Code    uint32 `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
		Push *struct {
			Channel string `json:"channel"`
			Leave   *struct {
				Info struct {
					User string `json:"user"`
				} `json:"info"`
			} `json:"leave"`
		} `json:"push"`
	}
	if err := json.Unmarshal(l, &m); err != nil {
		return cfLine{}, fmt.Errorf("bench: centrifugo sent %q: %w", l, err)
	}
	out := cfLine{id: m.ID}
	if m.Error != nil {
		out.err = fmt.Errorf("bench: centrifugo error %d: %s", m.Error.Code, m.Error.Message)
	}
	if m.Push != nil && m.Push.Leave != nil {
		out.channel, out.user = m.Push.Channel, m.Push.Leave.Info.User
	}
	return out, nil
}

// dialCentrifugo connects user with token and subscribes it to its own
// channel, returning once both replies arrived (before any reader runs).
func dialCentrifugo(ctx context.Context, hc *http.Client, url, token, user string) (*cfConn, error) {
	ws, _, err := websocket.Dial(ctx, url, &websocket.DialOptions{HTTPClient: hc})
	if err != nil {
		return nil, err
	}
	ws.SetReadLimit(4 << 20) // joins come batched, several to a message
	c := &cfConn{ws: ws, user: user, waiting: map[uint32]chan error{}}
	tok, _ := json.Marshal(token)
	ch, _ := json.Marshal(centrifugoChannel(user))
	if err := c.write(ctx, fmt.Sprintf(`{"id":1,"connect":{"token":%s,"name":"loadbench"}}`+"\n"+`{"id":2,"subscribe":{"channel":%s}}`, tok, ch)); err != nil {
		ws.CloseNow()
		return nil, err
	}
	c.nextID.Store(2)
	for got := 0; got < 2; {
		_, b, err := ws.Read(ctx)
		if err != nil {
			ws.CloseNow()
			return nil, err
		}
		for l := range bytes.SplitSeq(b, []byte("\n")) {
			p, err := parseCFLine(l)
			if err == nil {
				err = p.err
			}
			if err != nil {
				ws.CloseNow()
				return nil, fmt.Errorf("%s: %w", user, err)
			}
			if p.id == 1 || p.id == 2 {
				got++
			}
		}
	}
	return c, nil
}

func (c *cfConn) write(ctx context.Context, s string) error {
	return c.ws.Write(ctx, websocket.MessageText, []byte(s))
}

// subscribe sends a subscribe to channel and returns the channel its
// reply's error comes on (read delivers it).
func (c *cfConn) subscribe(ctx context.Context, channel string) <-chan error {
	id := c.nextID.Add(1)
	done := make(chan error, 1)
	c.mu.Lock()
	c.waiting[id] = done
	c.mu.Unlock()
	ch, _ := json.Marshal(channel)
	if err := c.write(ctx, fmt.Sprintf(`{"id":%d,"subscribe":{"channel":%s}}`, id, ch)); err != nil {
		done <- err
	}
	return done
}

// answered hands a reply to whoever waits for it.
func (c *cfConn) answered(id uint32, err error) {
	c.mu.Lock()
	done := c.waiting[id]
	delete(c.waiting, id)
	c.mu.Unlock()
	if done != nil {
		done <- err
	}
}

// fail answers every command still waiting with err: the connection ended.
func (c *cfConn) fail(err error) {
	c.mu.Lock()
	waiting := c.waiting
	c.waiting = map[uint32]chan error{}
	c.mu.Unlock()
	for _, done := range waiting {
		done <- err
	}
}

// cfWorker is a load process's side on Centrifugo: the same commands and
// answers as the worker on presence (runCommand), its counters and the
// target's receive times kept in the embedded worker. A heartbeat is a
// server ping answered with a pong: acks counts the pings, sent the pongs.
type cfWorker struct {
	*worker
	cfConns  []*cfConn // by user number
	cfTarget *cfConn
}

// runCentrifugoWorker is RunWorker on Centrifugo (WorkerOptions.Centrifugo).
func runCentrifugoWorker(ctx context.Context, base *worker, in io.Reader) error {
	w := &cfWorker{worker: base}
	if err := w.profiled(func() { w.dialAll(ctx) }); err != nil {
		return err
	}
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		if !w.runCommand(ctx, w, strings.Fields(sc.Text())) {
			break
		}
	}
	w.closeAllCF()
	return nil
}

// dialAll dials Count devices, Concurrency at a time, and says
// "connected N ERRORS START_NS END_NS" (as connectAll).
func (w *cfWorker) dialAll(ctx context.Context) {
	w.cfConns = dialEach(ctx, w.worker, w.dialCF)
}

// dialCF opens one device, retrying a failed dial a few times, and starts
// its reader.
func (w *cfWorker) dialCF(ctx context.Context, user string) (*cfConn, error) {
	tok := centrifugoToken([]byte(w.o.Secret), user, 24*time.Hour)
	var c *cfConn
	var err error
	for try := range 5 {
		dctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		c, err = dialCentrifugo(dctx, w.hc, w.o.URL, tok, user)
		cancel()
		if err == nil {
			break
		}
		time.Sleep(time.Duration(try+1) * 100 * time.Millisecond)
	}
	if err != nil {
		w.noteErr("dial " + user + ": " + err.Error())
		return nil, err
	}
	go w.readCF(ctx, c)
	return c, nil
}

// readCF answers pings, hands replies to their waiters, records the
// target's leaves and counts every end of the connection the worker did
// not ask for, by close code (-1: no close frame, e.g. EOF).
func (w *cfWorker) readCF(ctx context.Context, c *cfConn) {
	for {
		_, b, err := c.ws.Read(ctx)
		at := time.Now()
		if err == nil {
			err = w.handleCF(ctx, c, b, at)
		}
		if err != nil {
			c.ended.Store(true)
			c.fail(err)
			if !c.closing.Load() && ctx.Err() == nil {
				w.unexpected.Add(1)
				w.mu.Lock()
				w.codes[client.CloseCode(err)]++
				w.mu.Unlock()
				w.noteErr(c.user + ": " + err.Error())
				c.ws.CloseNow()
			}
			return
		}
	}
}

// handleCF handles one WebSocket message read at at.
func (w *cfWorker) handleCF(ctx context.Context, c *cfConn, b []byte, at time.Time) error {
	for l := range bytes.SplitSeq(b, []byte("\n")) {
		p, err := parseCFLine(l)
		switch {
		case err != nil:
			return err
		case p.ping:
			w.acks.Add(1)
			if err := c.write(ctx, "{}"); err != nil {
				return err
			}
			w.sent.Add(1)
		case p.join:
			c.joins.Add(1)
		case p.id != 0:
			c.answered(p.id, p.err)
		case p.channel != "":
			w.mu.Lock()
			if p.user == w.targetUser && p.channel == centrifugoChannel(w.targetUser) {
				w.recv = append(w.recv, at.UnixNano())
			}
			w.mu.Unlock()
		}
	}
	return nil
}

// The protocol of a load process on Centrifugo (runCommand).

func (w *cfWorker) openTarget(ctx context.Context, user string) error {
	c, err := w.dialCF(ctx, user)
	if err == nil {
		w.cfTarget = c
	}
	return err
}

func (w *cfWorker) closeTarget() {
	w.cfTarget.closing.Store(true)
	_ = w.cfTarget.ws.Close(websocket.StatusNormalClosure, "")
}

func (w *cfWorker) statsLine() string { return w.cfStatsLine() }
func (w *cfWorker) closeAll()         { w.closeAllCF() }

func (w *cfWorker) other(_ context.Context, cmd []string) {
	w.say("error unknown command %q", cmd[0])
}

// cfSubscribeWithin bounds the wait for the subscribers: every join is
// pushed to every subscriber already there, so setting up thousands takes
// minutes.
const cfSubscribeWithin = 6 * time.Minute

// cfSubscribeBatch is how many devices subscribe at once. All at once, the
// joins queue up ahead of the server's pings and it cuts devices for a
// late pong; so the first subscribes alone, and each batch after it waits
// until that one has read the batch's joins (the others get the same ones
// at the same pace).
const cfSubscribeBatch = 25

// subscribeAll subscribes the first k devices to target's channel and
// counts the subscriptions the server confirmed.
func (w *cfWorker) subscribeAll(ctx context.Context, target string, k int) int {
	w.mu.Lock()
	subs := slices.Clone(w.cfConns[:min(k, len(w.cfConns))])
	w.mu.Unlock()
	subs = slices.DeleteFunc(subs, func(c *cfConn) bool { return c == nil })
	deadline := time.Now().Add(cfSubscribeWithin)
	n := 0
	if len(subs) == 0 {
		return 0
	}
	pacer := subs[0]
	for from := 0; from < len(subs); {
		to := min(from+cfSubscribeBatch, len(subs))
		if from == 0 {
			to = 1 // the pacer alone: then it hears every later join
		}
		batch := subs[from:to]
		joins0 := pacer.joins.Load()
		replies := make([]<-chan error, len(batch))
		for i, c := range batch {
			replies[i] = c.subscribe(ctx, centrifugoChannel(target))
		}
		for i, r := range replies {
			select {
			case err := <-r:
				if err != nil {
					w.noteErr("subscribe " + batch[i].user + ": " + err.Error())
					continue
				}
				n++
			case <-time.After(time.Until(deadline)):
				return n
			}
		}
		if from > 0 {
			until := time.Now().Add(cfJoinsWithin)
			if until.After(deadline) {
				until = deadline
			}
			w.awaitJoins(pacer, joins0+int64(len(batch)), until)
		}
		from = to
	}
	return n
}

// cfJoinsWithin bounds the wait for one batch's joins: past it the next
// batch goes.
const cfJoinsWithin = 30 * time.Second

// awaitJoins waits until c has read want joins, or until.
func (w *cfWorker) awaitJoins(c *cfConn, want int64, until time.Time) {
	for c.joins.Load() < want && !c.ended.Load() && time.Now().Before(until) {
		time.Sleep(5 * time.Millisecond)
	}
}

func (w *cfWorker) cfStatsLine() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	live := 0
	for _, c := range w.cfConns {
		if c != nil {
			live++
		}
	}
	return w.stats(live)
}

func (w *cfWorker) closeAllCF() {
	w.mu.Lock()
	conns := slices.Clone(w.cfConns)
	w.mu.Unlock()
	for _, c := range conns {
		if c != nil {
			c.closing.Store(true)
			_ = c.ws.CloseNow()
		}
	}
}
