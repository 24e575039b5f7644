package gateway

import (
	"encoding/binary"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/presence-im/presence/messages"
	"google.golang.org/protobuf/proto"
)

// FuzzDecodeFrame: any bytes, on either subprotocol, decode without panic;
// what decodes re-encodes to the same frame.
func FuzzDecodeFrame(f *testing.F) {
	for _, s := range []string{
		`{"heartbeat":{"seq":"1","client_ts_ms":"1700000000000"}}`,
		`{"subscribe":{"request_id":"s1","targets":["alice","bob"]}}`,
		`{"unsubscribe":{"targets":["alice"]}}`,
		`{"set_status":{"show":"dnd"}}`,
		`{"presence":{"user":"a","status":"online","version":"3"}}`,
		`{"heartbeat":{"seq":1},"unknown_field":true}`,
		`{"heartbeat":{}, "subscribe":{}}`,
		`{`, `null`, `[]`,
	} {
		f.Add(false, []byte(s))
	}
	b, _ := proto.Marshal(&messages.Frame{Kind: &messages.Frame_Subscribe{Subscribe: &messages.Subscribe{RequestId: "r", Targets: []string{"x"}}}})
	f.Add(true, b)
	f.Add(true, []byte{0x0a, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, binary bool, data []byte) {
		sub, c := ProtoJSON, jsonCodec
		if binary {
			sub, c = ProtoBinary, binaryCodec
		}
		fr, err := DecodeFrame(sub, data)
		if err != nil {
			return
		}
		out, err := c.marshal(fr)
		if err != nil {
			t.Fatalf("decoded %q but cannot encode it: %v", data, err)
		}
		again, err := DecodeFrame(sub, out)
		if err != nil || !proto.Equal(fr, again) {
			t.Fatalf("round trip of %q: %v, %v != %v", data, err, fr, again)
		}
	})
}

// maskedFrame builds one masked client frame (test-only framing).
func maskedFrame(op byte, payload []byte) []byte { return rawFrame(0x80|op, payload) }

// rawFrame builds a masked client frame with any first byte (FIN, RSV,
// opcode), for probes that break the protocol.
func rawFrame(b0 byte, payload []byte) []byte {
	h := []byte{b0}
	switch n := len(payload); {
	case n < 126:
		h = append(h, 0x80|byte(n))
	case n <= 65535:
		h = append(h, 0x80|126, byte(n>>8), byte(n))
	default:
		h = append(h, 0x80|127)
		h = binary.BigEndian.AppendUint64(h, uint64(n))
	}
	key := []byte{1, 2, 3, 4}
	h = append(h, key...)
	for i, b := range payload {
		h = append(h, b^key[i%4])
	}
	return h
}

// FuzzMaskGuard: arbitrary bytes never panic the guard; a stream of legal
// masked frames (fragments with a ping between them too), cut anywhere,
// always passes and ends on a frame boundary.
func FuzzMaskGuard(f *testing.F) {
	f.Add([]byte("hello"), uint8(3), uint16(200))
	f.Add([]byte{0x81, 0x05, 'h', 'e', 'l', 'l', 'o'}, uint8(1), uint16(0))
	f.Add(make([]byte, 300), uint8(7), uint16(70000%65536))
	f.Fuzz(func(t *testing.T, raw []byte, cut uint8, big uint16) {
		g := &maskGuard{}
		_ = g.check(raw) // anything: no panic

		g = &maskGuard{}
		var stream []byte
		for i := 0; i < len(raw); i += 7 {
			stream = append(stream, maskedFrame(1, raw[i:min(len(raw), i+7)])...)
		}
		stream = append(stream, maskedFrame(2, make([]byte, int(big)))...)
		// A fragmented message with a ping between its fragments is legal.
		half := len(raw) / 2
		stream = append(stream, rawFrame(0x01, raw[:half])...)
		stream = append(stream, maskedFrame(9, raw[:min(half, 125)])...)
		stream = append(stream, rawFrame(0x00, nil)...)
		stream = append(stream, rawFrame(0x80, raw[half:])...)
		step := int(cut%32) + 1
		for i := 0; i < len(stream); i += step {
			if err := g.check(stream[i:min(len(stream), i+step)]); err != nil {
				t.Fatalf("masked stream refused at %d: %v", i, err)
			}
		}
		if g.n != 0 || g.skip != 0 {
			t.Fatalf("stream ended mid-frame: n=%d skip=%d", g.n, g.skip)
		}
	})
}

// FuzzHandshake: any request headers get one of the answers
// docs/protocol.md lists, with its required header, and leave no
// connection behind.
func FuzzHandshake(f *testing.F) {
	nd := startNode(f)
	valid := nd.token("alice", "phone")
	f.Add("GET", "Upgrade", "websocket", "13", "dGhlIHNhbXBsZSBub25jZQ==", "Bearer "+valid, "1", "presence.v1.json")
	f.Add("GET", "upgrade, keep-alive", "WebSocket", "8", "k", "Bearer x", "1", "")
	f.Add("POST", "Upgrade", "websocket", "13", "k", "", "-1", "presence.v1.proto")
	f.Add("GET", "Upgrade", "websocket", "13", "k", "bearer "+valid, "0", "x, presence.v1.proto")
	f.Fuzz(func(t *testing.T, method, connection, upgrade, version, key, auth, attempt, proto string) {
		r := httptest.NewRequest(http.MethodGet, "/ws", nil)
		r.Method = method
		for k, v := range map[string]string{"Connection": connection, "Upgrade": upgrade, "Sec-WebSocket-Version": version,
			"Sec-WebSocket-Key": key, "Authorization": auth, "Sec-WebSocket-Protocol": proto} {
			r.Header.Set(k, v)
		}
		q := r.URL.Query()
		q.Set("attempt", attempt)
		r.URL.RawQuery = q.Encode()
		w := httptest.NewRecorder() // not a Hijacker: an accepted handshake fails to upgrade and must release
		nd.srv.serveWS(w, r)
		switch w.Code {
		case 400, 401, 409, 500:
		case 426:
			if w.Header().Get("Sec-WebSocket-Version") != "13" {
				t.Fatal("426 without Sec-WebSocket-Version: 13")
			}
		case 429, 503:
			if w.Header().Get("Retry-After") == "" {
				t.Fatalf("%d without Retry-After", w.Code)
			}
		default:
			t.Fatalf("status %d", w.Code)
		}
		deadline := time.Now().Add(2 * time.Second)
		for nd.n.Counts()["connection"] != 0 {
			if time.Now().After(deadline) {
				t.Fatal("a connection actor was left behind")
			}
			time.Sleep(time.Millisecond)
		}
	})
}
