package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"
	"github.com/presence-im/presence/client"
	"github.com/presence-im/presence/gateway"
	"github.com/presence-im/presence/messages"
	"github.com/redis/go-redis/v9"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// PeerOptions configure the Redis-TTL peer.
type PeerOptions struct {
	Listen    string        // device WebSocket, GET /ws
	HTTP      string        // lookups (GET /presence/{user}) and GET /stats
	Redis     string        // host:port of redis-server
	Secret    []byte        // token key, as presenced's --secret
	Heartbeat time.Duration // interval told in hello
	TTL       time.Duration // key lifetime after each heartbeat (2-3 x heartbeat)
	Devices   []string      // the fixed device list a lookup reads with one MGET
}

// Peer is the design presence is compared with (docs/benchmarks.md in
// BENCHMARKS.md): device state in Redis, one string key per device
// (online:<user>:<device> = host) with a TTL renewed by SET ... EX on every
// heartbeat, DEL on a clean close, and PUBLISH on presence:<user> when the
// user's last device goes or the first comes. A lookup is one MGET over the
// fixed device list. Each process subscribes once per target its local
// subscribers watch and writes the event to each of them.
//
// Connections are served by net/http and github.com/coder/websocket, one
// goroutine per connection, as a small Go service would be written. The
// same frames as presence (docs/protocol.md) so the same load clients drive
// both.
type Peer struct {
	o    PeerOptions
	rdb  *redis.Client
	ps   *redis.PubSub
	tok  gateway.Tokens
	host string

	mu   sync.Mutex
	subs map[string]map[*peerConn]struct{} // target -> local subscribers
}

type peerConn struct {
	ws     *websocket.Conn
	binary bool
	mu     sync.Mutex
	watch  map[string]struct{}
}

// NewPeer connects to Redis; Serve runs it.
func NewPeer(ctx context.Context, o PeerOptions) (*Peer, error) {
	rdb := redis.NewClient(&redis.Options{Addr: o.Redis, PoolSize: 64})
	if err := rdb.Ping(ctx).Err(); err != nil {
		return nil, fmt.Errorf("bench: redis %s: %w", o.Redis, err)
	}
	if len(o.Devices) == 0 {
		o.Devices = []string{"d", "phone", "desktop", "web"}
	}
	p := &Peer{o: o, rdb: rdb, tok: gateway.Tokens{Key: o.Secret}, host: o.Listen,
		subs: map[string]map[*peerConn]struct{}{}}
	p.ps = rdb.Subscribe(ctx)
	return p, nil
}

// Serve listens on both addresses until ctx ends.
func (p *Peer) Serve(ctx context.Context) error {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /ws", p.serveWS)
	api := http.NewServeMux()
	api.HandleFunc("GET /presence/{user}", p.lookup)
	api.HandleFunc("GET /stats", p.stats)
	go p.fanOut(ctx)
	errc := make(chan error, 2)
	for _, s := range []struct {
		addr string
		h    http.Handler
	}{{p.o.Listen, mux}, {p.o.HTTP, api}} {
		ln, err := net.Listen("tcp", s.addr)
		if err != nil {
			return err
		}
		srv := &http.Server{Handler: s.h, ReadHeaderTimeout: 10 * time.Second}
		go func() { <-ctx.Done(); _ = srv.Close() }()
		go func() { errc <- srv.Serve(ln) }()
	}
	<-ctx.Done()
	_ = p.ps.Close()
	return p.rdb.Close()
}

func (p *Peer) key(user, device string) string { return "online:" + user + ":" + device }

func (p *Peer) serveWS(w http.ResponseWriter, r *http.Request) {
	tok, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	c, err := p.tok.Verify(tok)
	if err != nil {
		http.Error(w, "bad token", http.StatusUnauthorized)
		return
	}
	ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{client.ProtoJSON, client.ProtoBinary}})
	if err != nil {
		return
	}
	ws.SetReadLimit(messages.MaxMessage)
	pc := &peerConn{ws: ws, binary: ws.Subprotocol() == client.ProtoBinary, watch: map[string]struct{}{}}
	ctx := r.Context()
	key := p.key(c.User, c.Device)
	if err := p.rdb.Set(ctx, key, p.host, p.o.TTL).Err(); err != nil {
		ws.Close(websocket.StatusInternalError, "store")
		return
	}
	p.publish(ctx, c.User, messages.Status_online)
	hello := &messages.Frame{Kind: &messages.Frame_Hello{Hello: &messages.Hello{
		User: c.User, Device: c.Device, Node: p.host, HeartbeatIntervalMs: uint32(p.o.Heartbeat.Milliseconds()),
	}}}
	if pc.send(ctx, hello) == nil {
		p.readLoop(ctx, pc, key)
	}
	p.unwatch(pc)
	// A clean close and a silent one end alike here: the key goes now; a
	// peer that crashes leaves it to the TTL.
	bg := context.WithoutCancel(ctx)
	p.rdb.Del(bg, key)
	if p.offline(bg, c.User) {
		p.publish(bg, c.User, messages.Status_offline)
	}
	ws.CloseNow()
}

// readLoop answers frames until the device closes or is silent for 2.5
// heartbeats.
func (p *Peer) readLoop(ctx context.Context, pc *peerConn, key string) {
	for {
		rctx, cancel := context.WithTimeout(ctx, p.o.Heartbeat*5/2)
		kind, b, err := pc.ws.Read(rctx)
		cancel()
		if err != nil {
			return
		}
		f := &messages.Frame{}
		if (kind == websocket.MessageBinary) != pc.binary || pc.decode(b, f) != nil {
			pc.ws.Close(websocket.StatusProtocolError, "bad frame")
			return
		}
		switch k := f.GetKind().(type) {
		case *messages.Frame_Heartbeat:
			// The renewal and the heartbeat are one operation: SET ... EX
			// puts the key back even if it had expired.
			if p.rdb.Set(ctx, key, p.host, p.o.TTL).Err() != nil {
				return
			}
			if k.Heartbeat.Ack != nil && !*k.Heartbeat.Ack {
				continue // asked for no ack, as presence honours it
			}
			_ = pc.send(ctx, &messages.Frame{Kind: &messages.Frame_HeartbeatAck{HeartbeatAck: &messages.HeartbeatAck{
				Seq: k.Heartbeat.GetSeq(), ClientTsMs: k.Heartbeat.GetClientTsMs(), ServerTsMs: time.Now().UnixMilli()}}})
		case *messages.Frame_Subscribe:
			p.subscribe(ctx, pc, k.Subscribe)
		}
	}
}

func (pc *peerConn) decode(b []byte, f *messages.Frame) error {
	if pc.binary {
		return proto.Unmarshal(b, f)
	}
	return protojson.UnmarshalOptions{DiscardUnknown: true}.Unmarshal(b, f)
}

func encode(f *messages.Frame, binary bool) ([]byte, error) {
	if binary {
		return proto.Marshal(f)
	}
	return protojson.MarshalOptions{UseProtoNames: true}.Marshal(f)
}

func (pc *peerConn) send(ctx context.Context, f *messages.Frame) error {
	b, err := encode(f, pc.binary)
	if err != nil {
		return err
	}
	return pc.write(ctx, b)
}

func (pc *peerConn) write(ctx context.Context, b []byte) error {
	kind := websocket.MessageText
	if pc.binary {
		kind = websocket.MessageBinary
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return pc.ws.Write(ctx, kind, b)
}

// devices reads the user's device keys with one MGET.
func (p *Peer) devices(ctx context.Context, user string) ([]any, error) {
	keys := make([]string, len(p.o.Devices))
	for i, d := range p.o.Devices {
		keys[i] = p.key(user, d)
	}
	return p.rdb.MGet(ctx, keys...).Result()
}

func (p *Peer) offline(ctx context.Context, user string) bool {
	vals, err := p.devices(ctx, user)
	if err != nil {
		return false // unknown is never offline
	}
	for _, v := range vals {
		if v != nil {
			return false
		}
	}
	return true
}

// publish sends "status version" on the user's channel; version is the
// publish time in ms.
func (p *Peer) publish(ctx context.Context, user string, st messages.Status) {
	p.rdb.Publish(ctx, "presence:"+user, strconv.Itoa(int(st))+" "+strconv.FormatInt(time.Now().UnixMilli(), 10))
}

func (p *Peer) status(ctx context.Context, user string) (messages.Status, error) {
	if _, err := p.devices(ctx, user); err != nil {
		return messages.Status_unknown, err
	}
	if p.offline(ctx, user) {
		return messages.Status_offline, nil
	}
	return messages.Status_online, nil
}

// subscribe registers pc for targets' channels and answers a snapshot read
// with one MGET per target.
func (p *Peer) subscribe(ctx context.Context, pc *peerConn, s *messages.Subscribe) {
	snap := &messages.Snapshot{RequestId: s.GetRequestId()}
	var fresh []string
	p.mu.Lock()
	for _, t := range s.GetTargets() {
		m := p.subs[t]
		if m == nil {
			m = map[*peerConn]struct{}{}
			p.subs[t] = m
			fresh = append(fresh, "presence:"+t)
		}
		m[pc] = struct{}{}
	}
	p.mu.Unlock()
	pc.mu.Lock()
	for _, t := range s.GetTargets() {
		pc.watch[t] = struct{}{}
	}
	pc.mu.Unlock()
	if len(fresh) > 0 {
		_ = p.ps.Subscribe(ctx, fresh...)
	}
	for _, t := range s.GetTargets() {
		st, err := p.status(ctx, t)
		if err == nil {
			snap.Presences = append(snap.Presences, &messages.Presence{User: t, Status: st, Version: uint64(time.Now().UnixMilli())})
		}
	}
	_ = pc.send(ctx, &messages.Frame{Kind: &messages.Frame_Snapshot{Snapshot: snap}})
}

func (p *Peer) unwatch(pc *peerConn) {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	p.mu.Lock()
	defer p.mu.Unlock()
	for t := range pc.watch {
		delete(p.subs[t], pc)
	}
}

// fanOut writes each published change to the local subscribers of its
// target, encoding it once per subprotocol.
func (p *Peer) fanOut(ctx context.Context) {
	for m := range p.ps.Channel() {
		user, _ := strings.CutPrefix(m.Channel, "presence:")
		st, ver, _ := strings.Cut(m.Payload, " ")
		code, _ := strconv.Atoi(st)
		v, _ := strconv.ParseUint(ver, 10, 64)
		f := &messages.Frame{Kind: &messages.Frame_Presence{Presence: &messages.Presence{User: user, Status: messages.Status(code), Version: v}}}
		var enc [2][]byte
		enc[0], _ = encode(f, false)
		enc[1], _ = encode(f, true)
		p.mu.Lock()
		to := make([]*peerConn, 0, len(p.subs[user]))
		for pc := range p.subs[user] {
			to = append(to, pc)
		}
		p.mu.Unlock()
		for _, pc := range to {
			b := enc[0]
			if pc.binary {
				b = enc[1]
			}
			_ = pc.write(ctx, b)
		}
	}
}

// PeerLookup is the answer of GET /presence/{user}.
type PeerLookup struct {
	User    string   `json:"user"`
	Status  string   `json:"status"`
	Devices []string `json:"devices"`
}

func (p *Peer) lookup(w http.ResponseWriter, r *http.Request) {
	user := r.PathValue("user")
	vals, err := p.devices(r.Context(), user)
	if err != nil && !errors.Is(err, redis.Nil) {
		http.Error(w, "unknown", http.StatusServiceUnavailable)
		return
	}
	l := PeerLookup{User: user, Status: "offline", Devices: []string{}}
	for i, v := range vals {
		if v != nil {
			l.Status = "online"
			l.Devices = append(l.Devices, p.o.Devices[i])
		}
	}
	_ = json.NewEncoder(w).Encode(l)
}

// PeerStats is the answer of GET /stats: the peer's Go heap and Redis's
// own memory.
type PeerStats struct {
	HeapInuse   uint64 `json:"heap_inuse"`
	HeapAlloc   uint64 `json:"heap_alloc"` // with ?gc=1, right after a forced collection: the live heap
	RedisMemory uint64 `json:"redis_used_memory"`
	Goroutines  int    `json:"goroutines"`
}

func (p *Peer) stats(w http.ResponseWriter, r *http.Request) {
	if r.URL.Query().Get("gc") == "1" {
		runtime.GC()
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	s := PeerStats{HeapInuse: ms.HeapInuse, HeapAlloc: ms.HeapAlloc, Goroutines: runtime.NumGoroutine()}
	info, err := p.rdb.Info(r.Context(), "memory").Result()
	if err == nil {
		for _, line := range strings.Split(info, "\r\n") {
			if v, ok := strings.CutPrefix(line, "used_memory:"); ok {
				s.RedisMemory, _ = strconv.ParseUint(v, 10, 64)
			}
		}
	}
	_ = json.NewEncoder(w).Encode(s)
}
