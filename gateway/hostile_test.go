package gateway

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/presence-im/presence/client"
	"github.com/presence-im/presence/messages"
)

// The hostile-client suite of the device endpoint: each probe is what a
// client that breaks the rules sends, with the answer docs/protocol.md
// gives it. The admin API's probes are in admin/hostile_test.go.

// rawHandshake sends a handshake request over a fresh TCP connection and
// returns the connection, its reader and the response.
func rawHandshake(t *testing.T, nd *node, query, auth string) (net.Conn, *bufio.Reader, *http.Response) {
	t.Helper()
	conn, err := net.Dial("tcp", nd.srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	if auth != "" {
		auth = "Authorization: Bearer " + auth + "\r\n"
	}
	fmt.Fprintf(conn, "GET /ws?%s HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"+
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n%s\r\n", query, auth)
	r := bufio.NewReader(conn)
	res, err := http.ReadResponse(r, nil)
	if err != nil {
		t.Fatalf("handshake: %v", err)
	}
	return conn, r, res
}

// Handshakes the contract answers with a status and no state written.
func TestHostileHandshakes(t *testing.T) {
	nd := startNode(t)
	tok := nd.token("alice", "phone")
	for _, p := range []struct {
		name, query, auth string
		status            int
	}{
		{"attempt 2^64-1", "attempt=18446744073709551615", tok, 400},
		{"attempt 2^64", "attempt=18446744073709551616", tok, 400},
		{"attempt 2^53", "attempt=9007199254740992", tok, 400},
		{"attempt negative", "attempt=-1", tok, 400},
		{"no token", "attempt=1", "", 401},
		{"alg none", "attempt=1", "eyJhbGciOiJub25lIn0.e30.", 401},
		{"token of another key", "attempt=1", mustMint(t, Tokens{Key: []byte("other")}, "alice"), 401},
	} {
		t.Run(p.name, func(t *testing.T) {
			conn, r, res := rawHandshake(t, nd, p.query, p.auth)
			body, _ := io.ReadAll(io.LimitReader(res.Body, 1<<10))
			if res.StatusCode != p.status || len(body) == 0 {
				t.Fatalf("status %d %q, want %d with a reason", res.StatusCode, body, p.status)
			}
			if p.status == 401 {
				// The connection is closed after a 401: nothing more is read
				// from it, whatever the client pipelined.
				fmt.Fprintf(conn, "GET /ws HTTP/1.1\r\nHost: x\r\n\r\n")
				if _, err := r.ReadByte(); !errors.Is(err, io.EOF) && !isReset(err) {
					t.Fatalf("after a 401 the connection answered again (err %v)", err)
				}
				if !res.Close {
					t.Errorf("401 without Connection: close: %v", res.Header)
				}
			}
		})
	}
	if d := nd.route("alice"); len(d) != 0 {
		t.Fatalf("refused handshakes left a route: %v", d)
	}
}

func isReset(err error) bool {
	var op *net.OpError
	return errors.As(err, &op)
}

func mustMint(t *testing.T, tk Tokens, user string) string {
	t.Helper()
	tok, err := tk.Mint(user, "phone", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// Frames that break RFC 6455 get a close frame with the code and a reason,
// then the lease is released.
func TestHostileFrames(t *testing.T) {
	nd := startNode(t)
	long := make([]byte, 126)
	for i, p := range []struct {
		name   string
		frames [][]byte
		code   uint16
	}{
		{"unmasked", [][]byte{{0x81, 0x02, 'h', 'i'}}, 1002},
		{"fragmented ping", [][]byte{rawFrame(0x09, []byte("p"))}, 1002},
		{"reserved data opcode", [][]byte{rawFrame(0x83, nil)}, 1002},
		{"reserved control opcode", [][]byte{rawFrame(0x8b, nil)}, 1002},
		{"RSV1 without an extension", [][]byte{rawFrame(0xc1, []byte("{}"))}, 1002},
		{"RSV3", [][]byte{rawFrame(0x91, []byte("{}"))}, 1002},
		{"orphan continuation", [][]byte{rawFrame(0x80, []byte("x"))}, 1002},
		{"text inside a fragmented text", [][]byte{rawFrame(0x01, []byte("{")), rawFrame(0x81, []byte("}"))}, 1002},
		{"ping over 125 bytes", [][]byte{rawFrame(0x89, long)}, 1002},
		{"text that is not UTF-8", [][]byte{rawFrame(0x81, []byte("{\"a\":\"\xff\xfe\"}"))}, 1007},
		{"binary on the JSON subprotocol", [][]byte{rawFrame(0x82, []byte{1})}, 1003},
	} {
		t.Run(p.name, func(t *testing.T) {
			user := fmt.Sprintf("u%d", i)
			conn, r, res := rawHandshake(t, nd, "attempt=1", nd.token(user, "phone"))
			if res.StatusCode != 101 {
				t.Fatalf("handshake %d", res.StatusCode)
			}
			if op, _ := readFrame(t, r); op != 1 {
				t.Fatalf("first frame opcode %d, want text (hello)", op)
			}
			for _, f := range p.frames {
				if _, err := conn.Write(f); err != nil {
					t.Fatal(err)
				}
			}
			for {
				op, body := readFrame(t, r)
				if op != 8 {
					continue
				}
				if len(body) < 3 || binary.BigEndian.Uint16(body) != p.code {
					t.Fatalf("close %v, want %d with a reason", body, p.code)
				}
				break
			}
			eventually(t, 2*time.Second, "lease released", func() bool { return len(nd.route(user)) == 0 })
		})
	}
}

// A set_status outside the enum gets an error frame naming the values and
// changes nothing; the connection stays.
func TestHostileShowOutOfRange(t *testing.T) {
	nd := startNode(t)
	c := nd.dial("alice", "phone", 1)
	for _, raw := range []string{`{"set_status":{"show":77}}`, `{"set_status":{"show":-1}}`, `{"set_status":{}}`} {
		if err := c.SendRaw(t.Context(), false, []byte(raw)); err != nil {
			t.Fatal(err)
		}
		f := next(t, c, 2*time.Second, func(f *messages.Frame) bool { return f.GetError() != nil })
		if e := f.GetError(); e.GetCode() != 400 || !strings.Contains(e.GetMessage(), "available, away, dnd or invisible") {
			t.Fatalf("%s: error %v", raw, e)
		}
	}
	st := nd.route("alice")
	if len(st) != 1 {
		t.Fatalf("route %v: the connection did not stay", st)
	}
}

// A connection outlives no token: it is closed with 4401 when the token
// expires, and its lease released.
func TestTokenExpiryClosesConnection(t *testing.T) {
	nd := startNode(t)
	tok, err := Tokens{Key: secret}.Mint("alice", "phone", 2*time.Second) // expiry in whole seconds: 1 to 2 s from now
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	c, err := client.Dial(ctx, nd.url(), client.DialOptions{Token: tok, Attempt: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	nd.keepAlive(ctx, c)
	if code := closeCode(t, c, 5*time.Second); code != int(messages.CloseTokenExpired) {
		t.Fatalf("close code %d, want %d", code, messages.CloseTokenExpired)
	}
	eventually(t, 2*time.Second, "lease released", func() bool { return len(nd.route("alice")) == 0 })
}

// Rotation: tokens of a previous key still verify; new ones are signed
// with the current key only.
func TestTokenRotation(t *testing.T) {
	old := Tokens{Key: []byte("old")}
	rotated := Tokens{Key: []byte("new"), Previous: [][]byte{[]byte("old")}}
	byOld := mustMint(t, old, "alice")
	if _, err := rotated.Verify(byOld); err != nil {
		t.Fatalf("a token of the previous key: %v", err)
	}
	byNew := mustMint(t, rotated, "alice")
	if _, err := old.Verify(byNew); err == nil {
		t.Fatal("a new token verified under the old key: minted with a previous one")
	}
	if _, err := (Tokens{Key: []byte("new")}).Verify(byOld); !errors.Is(err, ErrBadToken) {
		t.Fatalf("once the old key is dropped its tokens are refused: %v", err)
	}
}
