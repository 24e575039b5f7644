package bench

import (
	"bufio"
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// The connection token is an HS256 JWT whose signature checks under the
// key and whose subject is the user.
func TestCentrifugoToken(t *testing.T) {
	tok := centrifugoToken([]byte("k"), "bench000007", time.Hour)
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		t.Fatalf("token %q: want three parts", tok)
	}
	mac := hmac.New(sha256.New, []byte("k"))
	mac.Write([]byte(parts[0] + "." + parts[1]))
	if got := base64.RawURLEncoding.EncodeToString(mac.Sum(nil)); got != parts[2] {
		t.Errorf("signature %s, want %s", parts[2], got)
	}
	var h struct{ Alg string }
	var c struct {
		Sub string
		Exp int64
	}
	for i, v := range []any{&h, &c} {
		b, err := base64.RawURLEncoding.DecodeString(parts[i])
		if err != nil || json.Unmarshal(b, v) != nil {
			t.Fatalf("part %d of %q does not decode: %v", i, tok, err)
		}
	}
	if h.Alg != "HS256" || c.Sub != "bench000007" || c.Exp < time.Now().Unix() {
		t.Errorf("header %+v, claims %+v: want HS256, bench000007, an expiry ahead", h, c)
	}
}

// The config holds what the bench relies on: the ping interval, a pong
// timeout below it (Centrifugo's rule), the token key, and the namespace's
// presence with join and leave pushed to every subscriber.
func TestCentrifugoConfig(t *testing.T) {
	b, err := centrifugoConfig(8123, 5*time.Second, "s3")
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		HTTPServer struct{ Port int } `json:"http_server"`
		Client     struct {
			Token        struct{ HMACSecretKey string } `json:"token"`
			PingInterval string                         `json:"ping_interval"`
			PongTimeout  string                         `json:"pong_timeout"`
		}
		Channel struct {
			Namespaces []map[string]any
		}
		HTTPAPI struct{ Key string } `json:"http_api"`
	}
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	ping, _ := time.ParseDuration(c.Client.PingInterval)
	pong, _ := time.ParseDuration(c.Client.PongTimeout)
	if c.HTTPServer.Port != 8123 || ping != 5*time.Second || pong <= 0 || pong >= ping || c.HTTPAPI.Key == "" {
		t.Errorf("port %d, ping %v, pong %v, API key %q", c.HTTPServer.Port, ping, pong, c.HTTPAPI.Key)
	}
	if !bytes.Contains(b, []byte(`"hmac_secret_key": "s3"`)) {
		t.Errorf("the token key is not s3:\n%s", b)
	}
	if len(c.Channel.Namespaces) != 1 {
		t.Fatalf("namespaces %v, want one", c.Channel.Namespaces)
	}
	ns := c.Channel.Namespaces[0]
	for _, k := range []string{"presence", "join_leave", "force_push_join_leave", "allow_subscribe_for_client"} {
		if ns[k] != true {
			t.Errorf("namespace %v: %s is not true", ns, k)
		}
	}
	if ns["name"] != centrifugoNS {
		t.Errorf("namespace name %v, want %s", ns["name"], centrifugoNS)
	}
}

func TestParseCFLine(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want cfLine
		err  bool
	}{
		{in: "{}", want: cfLine{ping: true}},
		{in: `{"id":3,"subscribe":{}}`, want: cfLine{id: 3}},
		{in: `{"push":{"channel":"cf:a","join":{"info":{"user":"b","client":"x"}}}}`, want: cfLine{join: true}},
		{in: `{"push":{"channel":"cf:a","pub":{"data":{}}}}`},
		{in: `{"push":{"channel":"cf:a","leave":{"info":{"user":"a","client":"x"}}}}`, want: cfLine{channel: "cf:a", user: "a"}},
		{in: `{"id":1,"connect":`, err: true},
	} {
		got, err := parseCFLine([]byte(tc.in))
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("parseCFLine(%s) = %+v, %v; want %+v, error %v", tc.in, got, err, tc.want, tc.err)
		}
	}
	got, err := parseCFLine([]byte(`{"id":2,"error":{"code":103,"message":"permission denied"}}`))
	if err != nil || got.id != 2 || got.err == nil || !strings.Contains(got.err.Error(), "103") {
		t.Errorf("an error reply: %+v, %v; want id 2 and the error's code", got, err)
	}
}

// fakeCentrifugo answers connect and subscribe (refusing connect when
// refuse), pushes each subscribe's join to the channel's subscribers, and
// lets the test push a line to every connection and count the pongs.
type fakeCentrifugo struct {
	refuse  bool
	mu      sync.Mutex
	conns   []*websocket.Conn
	pongs   int
	subs    map[string]int // channel -> subscribers
	members map[string][]*websocket.Conn
}

func (f *fakeCentrifugo) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c, err := websocket.Accept(w, r, nil)
	if err != nil {
		return
	}
	f.mu.Lock()
	f.conns = append(f.conns, c)
	f.mu.Unlock()
	for {
		_, b, err := c.Read(context.Background())
		if err != nil {
			return
		}
		for l := range bytes.SplitSeq(b, []byte("\n")) {
			if !f.answer(c, l) {
				return
			}
		}
	}
}

// answer answers one command; false when it closed the connection.
func (f *fakeCentrifugo) answer(c *websocket.Conn, l []byte) bool {
	var cmd struct {
		ID        uint32
		Connect   *struct{ Token string }
		Subscribe *struct{ Channel string }
	}
	_ = json.Unmarshal(l, &cmd)
	var reply string
	switch {
	case cmd.ID == 0:
		f.mu.Lock()
		f.pongs++
		f.mu.Unlock()
		return true
	case cmd.Connect != nil && f.refuse:
		_ = c.Write(context.Background(), websocket.MessageText, fmt.Appendf(nil, `{"id":%d,"error":{"code":109,"message":"token expired"}}`, cmd.ID))
		c.Close(3500, "invalid token")
		return false
	case cmd.Connect != nil:
		reply = fmt.Sprintf(`{"id":%d,"connect":{"client":"c","ping":1,"pong":true}}`, cmd.ID)
	case cmd.Subscribe != nil:
		ch := cmd.Subscribe.Channel
		f.mu.Lock()
		f.subs[ch]++
		f.members[ch] = append(f.members[ch], c)
		members := slices.Clone(f.members[ch])
		f.mu.Unlock()
		_ = c.Write(context.Background(), websocket.MessageText, fmt.Appendf(nil, `{"id":%d,"subscribe":{}}`, cmd.ID))
		for _, m := range members { // as join_leave with force_push_join_leave
			_ = m.Write(context.Background(), websocket.MessageText, fmt.Appendf(nil, `{"push":{"channel":%q,"join":{"info":{"user":"u"}}}}`, ch))
		}
		return true
	}
	_ = c.Write(context.Background(), websocket.MessageText, []byte(reply))
	return true
}

func (f *fakeCentrifugo) pushAll(t *testing.T, msg string) {
	t.Helper()
	f.mu.Lock()
	conns := f.conns
	f.mu.Unlock()
	for _, c := range conns {
		if err := c.Write(context.Background(), websocket.MessageText, []byte(msg)); err != nil {
			t.Fatal(err)
		}
	}
}

// cfWorkerUnderTest runs a Centrifugo load process of n devices against
// f; ask sends a command and returns the answer's line.
func cfWorkerUnderTest(t *testing.T, f *fakeCentrifugo, n int) (ask func(string) string, connected string) {
	t.Helper()
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	o := WorkerOptions{URL: "ws" + strings.TrimPrefix(srv.URL, "http") + "/connection/websocket", Secret: "k",
		Prefix: "bench", Count: n, Concurrency: 2, Interval: time.Second, Centrifugo: true}
	done := make(chan error, 1)
	go func() { done <- RunWorker(context.Background(), o, inR, outW); outW.Close() }()
	lines := make(chan string, 64)
	go func() {
		sc := bufio.NewScanner(outR)
		for sc.Scan() {
			if !strings.HasPrefix(sc.Text(), "progress") {
				lines <- sc.Text()
			}
		}
		close(lines)
	}()
	next := func() string {
		select {
		case l := <-lines:
			return l
		case <-time.After(10 * time.Second):
			t.Fatal("the worker did not answer within 10 s")
			return ""
		}
	}
	t.Cleanup(func() {
		fmt.Fprintln(inW, "quit")
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	return func(cmd string) string { fmt.Fprintln(inW, cmd); return next() }, next()
}

// A Centrifugo load process connects its devices, each subscribed to its
// own channel, answers every ping with a pong, subscribes the first K to
// the target's channel and records the target's leaves, not the joins or
// another user's leave in the same message.
func TestCentrifugoWorker(t *testing.T) {
	f := &fakeCentrifugo{subs: map[string]int{}, members: map[string][]*websocket.Conn{}}
	ask, connected := cfWorkerUnderTest(t, f, 3)
	if !strings.HasPrefix(connected, "connected 3 0 ") {
		t.Fatalf("%q, want 3 connected and no error", connected)
	}
	if got := ask("sub benchtarget 2"); got != "subscribed 2" {
		t.Fatalf("sub: %q", got)
	}
	f.mu.Lock()
	subs := f.subs
	f.mu.Unlock()
	if subs["cf:benchtarget"] != 2 || subs["cf:bench000000"] != 1 || subs["cf:bench000002"] != 1 {
		t.Errorf("subscriptions %v: want each device on its own channel, 2 on the target's", subs)
	}
	f.pushAll(t, "{}")
	f.pushAll(t, `{"push":{"channel":"cf:benchtarget","join":{"info":{"user":"bench000001"}}}}`+"\n"+
		`{"push":{"channel":"cf:benchtarget","leave":{"info":{"user":"bench000001"}}}}`+"\n"+
		`{"push":{"channel":"cf:benchtarget","leave":{"info":{"user":"benchtarget"}}}}`)
	deadline := time.Now().Add(10 * time.Second)
	leaves, stats := 0, ""
	for time.Now().Before(deadline) {
		var n int
		fmt.Sscanf(ask("lat"), "lat %d", &n)
		leaves += n
		stats = ask("stats")
		f.mu.Lock()
		pongs := f.pongs
		f.mu.Unlock()
		if leaves == 3 && strings.HasPrefix(stats, "stats 3 3 0 3 ") && pongs == 3 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("%d leaves, %q: want the target's 3 leaves, 3 pings answered, none cut, 3 live", leaves, stats)
}

// A refused connect (an error reply) is a failed dial with the server's
// error among the first errors, and no device is counted.
func TestCentrifugoWorkerRefused(t *testing.T) {
	f := &fakeCentrifugo{refuse: true, subs: map[string]int{}, members: map[string][]*websocket.Conn{}}
	ask, connected := cfWorkerUnderTest(t, f, 2)
	if !strings.HasPrefix(connected, "connected 0 2 ") {
		t.Fatalf("%q, want 0 connected and 2 errors", connected)
	}
	if st := ask("stats"); !strings.Contains(st, "token expired") || !strings.HasPrefix(st, "stats 0 0 0 0 ") {
		t.Errorf("%q: want no device and the server's error", st)
	}
	if f.subs["cf:bench000000"] != 0 {
		t.Errorf("subscriptions %v after a refused connect", f.subs)
	}
}

// The table compares presence with each peer in a column of its own.
func TestReportRatioPerPeer(t *testing.T) {
	o := Options{N: 10, Runs: 1, Systems: []string{"presence", "redis-ttl", "centrifugo"}}
	results := []RunResult{{System: "presence", ConnectRate: 100}, {System: "redis-ttl", ConnectRate: 50}, {System: "centrifugo", ConnectRate: 400}}
	var b bytes.Buffer
	Report(&b, o, "test", results)
	for _, want := range []string{
		"| per device | presence | redis-ttl | centrifugo | presence vs redis-ttl | presence vs centrifugo | target (presence) |\n|---|---|---|---|---|---|---|\n",
		" /s | 2.00x better | **4.00x worse** | >= 5000: **missed**",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("the table has no %q:\n%s", want, b.String())
		}
	}
}

// A figure only presence measures (the heartbeat's processing p99) is
// "n/a" for the peers and no ratio, and judged against seed 002's limit.
func TestReportNotMeasuredIsNA(t *testing.T) {
	o := Options{N: 10, Runs: 2, Systems: []string{"presence", "centrifugo"}}
	results := []RunResult{
		{System: "presence", BeatP99: 0.0004}, {System: "centrifugo", BeatP99: math.NaN()},
		{System: "presence", BeatP99: 0.0009}, {System: "centrifugo", BeatP99: math.NaN()},
	}
	var b bytes.Buffer
	Report(&b, o, "test", results)
	want := "| heartbeat processing in the node, p99 (seed 002; presence_heartbeat_processing_seconds) | 0.40 / 0.90 / 0.90 ms | n/a |  | <= 0.80: **missed** by 0.10 ms (1.1x) |"
	if !strings.Contains(b.String(), want) {
		t.Errorf("the table has no %q:\n%s", want, b.String())
	}
}
