package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
	"github.com/presence-im/presence/internal/beatjson"
	"github.com/presence-im/presence/messages"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// Subprotocols (docs/protocol.md).
const (
	ProtoJSON   = "presence.v1.json"
	ProtoBinary = "presence.v1.proto"
)

// ReadLimit bounds a frame the SDK reads from the node. messages.MaxMessage
// bounds what a device sends, not what a node sends: a snapshot, a
// presence_batch or a restored snapshot holds a presence of every target
// asked, changed or degraded, up to --max-subscriptions of them, each with
// its devices and status text, so it is far larger than a device's
// largest frame; this only guards the reader against a runaway.
const ReadLimit = 16 << 20

// ErrTooLarge refuses a frame over messages.MaxMessage bytes before it is
// sent: the node would close the connection with 1009.
var ErrTooLarge = errors.New("client: frame too large")

// HandshakeError is a refused handshake: the HTTP status and, for 429 and
// 503, the server's Retry-After.
type HandshakeError struct {
	Status     int
	RetryAfter time.Duration
	Body       string
}

func (e *HandshakeError) Error() string {
	return fmt.Sprintf("client: handshake refused: %d %s", e.Status, e.Body)
}

// Conn is one device connection. Next must be called from one goroutine;
// the Send methods may be called from any.
type Conn struct {
	ws          *websocket.Conn
	subprotocol string
	Hello       *messages.Hello
	heard       atomic.Int64 // Unix ns of the last frame read
}

// DialOptions are the knobs of one connection.
type DialOptions struct {
	Token       string
	Attempt     uint64
	Subprotocol string       // ProtoJSON (default) or ProtoBinary
	HTTPClient  *http.Client // nil: http.DefaultClient
	// Platform is the device's kind (?platform=; 0: not sent, other).
	Platform messages.Platform
	// Activity is what the device is doing as it connects (?activity=;
	// 0: not declared, and the device counts as active while connected).
	Activity messages.Activity
	// Class is the heartbeat class (?class=): "" or "standard", "battery".
	Class string
}

// Dial connects to a node's /ws URL and waits for hello.
func Dial(ctx context.Context, rawURL string, o DialOptions) (*Conn, error) {
	if o.Subprotocol == "" {
		o.Subprotocol = ProtoJSON
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, err
	}
	q := u.Query()
	q.Set("attempt", strconv.FormatUint(o.Attempt, 10))
	if o.Platform != messages.Platform_platform_unspecified {
		q.Set("platform", o.Platform.String())
	}
	if o.Activity != messages.Activity_activity_unspecified {
		q.Set("activity", o.Activity.String())
	}
	if o.Class != "" {
		q.Set("class", o.Class)
	}
	u.RawQuery = q.Encode()
	h := http.Header{}
	h.Set("Authorization", "Bearer "+o.Token)
	ws, res, err := websocket.Dial(ctx, u.String(), &websocket.DialOptions{
		HTTPClient: o.HTTPClient, HTTPHeader: h, Subprotocols: []string{o.Subprotocol},
	})
	if err != nil {
		if res != nil && res.StatusCode != http.StatusSwitchingProtocols {
			he := &HandshakeError{Status: res.StatusCode}
			if s, err := strconv.Atoi(res.Header.Get("Retry-After")); err == nil {
				he.RetryAfter = time.Duration(s) * time.Second
			}
			return nil, he
		}
		return nil, err
	}
	ws.SetReadLimit(ReadLimit)
	c := &Conn{ws: ws, subprotocol: o.Subprotocol}
	f, err := c.Next(ctx)
	if err != nil {
		ws.CloseNow()
		return nil, err
	}
	if c.Hello = f.GetHello(); c.Hello == nil {
		ws.CloseNow()
		return nil, fmt.Errorf("client: first frame is not hello: %v", f)
	}
	return c, nil
}

// Next reads the next frame.
func (c *Conn) Next(ctx context.Context) (*messages.Frame, error) {
	f, _, err := c.NextAt(ctx)
	return f, err
}

// NextAt is Next with the time its bytes were read, before they are
// decoded: a receive time that leaves out the client's own decoding (the
// bench's fan-out latency, bench).
func (c *Conn) NextAt(ctx context.Context) (*messages.Frame, time.Time, error) {
	kind, b, err := c.ws.Read(ctx)
	at := time.Now()
	if err != nil {
		return nil, at, err
	}
	c.heard.Store(at.UnixNano())
	f, err := c.decode(kind, b)
	return f, at, err
}

func (c *Conn) decode(kind websocket.MessageType, b []byte) (*messages.Frame, error) {
	if c.subprotocol != ProtoBinary {
		if a, ok := beatjson.ParseAck(b); ok { // most frames a device reads (internal/beatjson)
			return &messages.Frame{Kind: &messages.Frame_HeartbeatAck{HeartbeatAck: &messages.HeartbeatAck{
				Seq: a.Seq, ClientTsMs: a.ClientTS, ServerTsMs: a.ServerTS}}}, nil
		}
		if pr, ok := beatjson.ParsePresence(b); ok { // most of the rest: a watched user's change
			return &messages.Frame{Kind: &messages.Frame_Presence{Presence: pr}}, nil
		}
	}
	f := &messages.Frame{}
	if c.subprotocol == ProtoBinary {
		if kind != websocket.MessageBinary {
			return nil, errors.New("client: text frame on the binary subprotocol")
		}
		return f, proto.Unmarshal(b, f)
	}
	return f, protojson.UnmarshalOptions{DiscardUnknown: true}.Unmarshal(b, f)
}

// Send writes one frame; one over messages.MaxMessage bytes is refused
// with ErrTooLarge and nothing is sent.
func (c *Conn) Send(ctx context.Context, f *messages.Frame) error {
	kind, b, err := c.encode(f)
	if err != nil {
		return err
	}
	if len(b) > messages.MaxMessage {
		return fmt.Errorf("%w: %d bytes: a message is at most %d bytes (the node closes a larger one with %d): send fewer targets at a time",
			ErrTooLarge, len(b), messages.MaxMessage, messages.CloseTooBig)
	}
	return c.ws.Write(ctx, kind, b)
}

func (c *Conn) encode(f *messages.Frame) (websocket.MessageType, []byte, error) {
	if c.subprotocol == ProtoBinary {
		b, err := proto.Marshal(f)
		return websocket.MessageBinary, b, err
	}
	b, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(f)
	return websocket.MessageText, b, err
}

// SendRaw writes one message as it is, binary or text: for protocol tests
// (wrong frame types, undecodable frames, oversize messages).
func (c *Conn) SendRaw(ctx context.Context, binary bool, b []byte) error {
	kind := websocket.MessageText
	if binary {
		kind = websocket.MessageBinary
	}
	return c.ws.Write(ctx, kind, b)
}

// Heartbeat sends a heartbeat frame without the ack field: the node acks
// it, as every node did before the field.
func (c *Conn) Heartbeat(ctx context.Context, seq uint64) error {
	return c.beat(ctx, seq, beatjson.AckUnset)
}

// HeartbeatAsk sends a heartbeat that asks for an ack (ack true) or for
// none (false); a node before the field acks it either way
// (docs/protocol.md, "Acks on request"). AckPolicy says when to ask.
func (c *Conn) HeartbeatAsk(ctx context.Context, seq uint64, ack bool) error {
	return c.beat(ctx, seq, beatjson.AckOf(&ack))
}

// beat sends a heartbeat: on the JSON subprotocol written as protojson
// would write it, without protojson (internal/beatjson: most of the
// frames a device sends; protojson's encoding of them was 7.9% of a bench
// load process's samples over the connect phase, BENCHMARKS.md).
func (c *Conn) beat(ctx context.Context, seq uint64, ack beatjson.Ack) error {
	now := time.Now().UnixMilli()
	if c.subprotocol == ProtoBinary {
		hb := &messages.Heartbeat{Seq: seq, ClientTsMs: now}
		if ack != beatjson.AckUnset {
			hb.Ack = proto.Bool(ack == beatjson.AckYes)
		}
		return c.Send(ctx, &messages.Frame{Kind: &messages.Frame_Heartbeat{Heartbeat: hb}})
	}
	var buf [96]byte
	return c.ws.Write(ctx, websocket.MessageText, beatjson.AppendHeartbeat(buf[:0], seq, now, ack))
}

// Heard is when the connection last read a frame (the hello at first).
func (c *Conn) Heard() time.Time { return time.Unix(0, c.heard.Load()) }

// Subscribe asks for a snapshot of targets and their changes, in real
// time.
func (c *Conn) Subscribe(ctx context.Context, requestID string, targets ...string) error {
	return c.SubscribeTier(ctx, requestID, messages.Tier_realtime, targets...)
}

// SubscribeTier asks for a snapshot of targets and their changes in tier:
// batched changes come merged, in presence_batch frames.
func (c *Conn) SubscribeTier(ctx context.Context, requestID string, tier messages.Tier, targets ...string) error {
	return c.Send(ctx, &messages.Frame{Kind: &messages.Frame_Subscribe{Subscribe: &messages.Subscribe{RequestId: requestID, Targets: targets, Tier: tier}}})
}

// Query asks for the presence of targets once: a snapshot with requestID
// answers, nothing subscribed.
func (c *Conn) Query(ctx context.Context, requestID string, targets ...string) error {
	return c.Send(ctx, &messages.Frame{Kind: &messages.Frame_Query{Query: &messages.Query{RequestId: requestID, Targets: targets}}})
}

// Unsubscribe stops changes of targets.
func (c *Conn) Unsubscribe(ctx context.Context, targets ...string) error {
	return c.Send(ctx, &messages.Frame{Kind: &messages.Frame_Unsubscribe{Unsubscribe: &messages.Unsubscribe{Targets: targets}}})
}

// SetStatus sets the user's show.
func (c *Conn) SetStatus(ctx context.Context, show messages.Show) error {
	return c.SetStatusText(ctx, show, "", time.Time{})
}

// SetStatusText sets the user's show and status text until expires (zero:
// until changed); show auto leaves the show derived.
func (c *Conn) SetStatusText(ctx context.Context, show messages.Show, text string, expires time.Time) error {
	st := &messages.SetStatus{Show: show, Text: text}
	if !expires.IsZero() {
		st.ExpiresMs = expires.UnixMilli()
	}
	return c.Send(ctx, &messages.Frame{Kind: &messages.Frame_SetStatus{SetStatus: st}})
}

// SetActivity declares what the device is doing.
func (c *Conn) SetActivity(ctx context.Context, a messages.Activity) error {
	return c.Send(ctx, &messages.Frame{Kind: &messages.Frame_SetActivity{SetActivity: &messages.SetActivity{Activity: a}}})
}

// StateSync answers a state_sync_request with its nonce.
func (c *Conn) StateSync(ctx context.Context, nonce string, a messages.Activity) error {
	return c.Send(ctx, &messages.Frame{Kind: &messages.Frame_StateSync{StateSync: &messages.StateSync{Nonce: nonce, Activity: a}}})
}

// Ping sends a WebSocket ping and waits for its pong.
func (c *Conn) Ping(ctx context.Context) error { return c.ws.Ping(ctx) }

// Close closes normally.
func (c *Conn) Close() error { return c.ws.Close(websocket.StatusNormalClosure, "") }

// CloseNow drops the connection without a close handshake.
func (c *Conn) CloseNow() error { return c.ws.CloseNow() }

// CloseCode is the close code of a read error, or -1.
func CloseCode(err error) int { return int(websocket.CloseStatus(err)) }
