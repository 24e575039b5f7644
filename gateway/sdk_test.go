package gateway

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// The browser SDK from the device listener: its bytes with the type, an
// ETag of the content, revalidation headers, CORS for module scripts of
// other origins, and 304 for an If-None-Match that names the ETag.
func TestServesTheBrowserSDK(t *testing.T) {
	nd := startNode(t)
	for _, c := range []struct{ path, file, ctype string }{
		{"/sdk/presence.js", "../client/js/presence.js", "text/javascript; charset=utf-8"},
		{"/sdk/presence.d.ts", "../client/js/presence.d.ts", "application/typescript; charset=utf-8"},
	} {
		want, err := os.ReadFile(c.file)
		if err != nil {
			t.Fatal(err)
		}
		res, body := get(t, "http://"+nd.srv.Addr()+c.path, "")
		h := res.Header
		if res.StatusCode != 200 || string(body) != string(want) || h.Get("Content-Type") != c.ctype || h.Get("Cache-Control") != "no-cache" ||
			h.Get("Access-Control-Allow-Origin") != "*" || len(h.Get("ETag")) != 34 {
			t.Fatalf("GET %s: %d %v, %d bytes (file %d)", c.path, res.StatusCode, h, len(body), len(want))
		}
		again, body := get(t, "http://"+nd.srv.Addr()+c.path, h.Get("ETag"))
		if again.StatusCode != http.StatusNotModified || len(body) != 0 || again.Header.Get("ETag") != h.Get("ETag") {
			t.Fatalf("GET %s with If-None-Match: %d, %d bytes", c.path, again.StatusCode, len(body))
		}
		if other, _ := get(t, "http://"+nd.srv.Addr()+c.path, `"0123"`); other.StatusCode != 200 {
			t.Fatalf("GET %s with another ETag: %d", c.path, other.StatusCode)
		}
	}
}

func get(t *testing.T, u, etag string) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest("GET", u, nil)
	if etag != "" {
		req.Header.Set("If-None-Match", etag)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res, b
}

// A browser cannot set Authorization: the token in ?token= is taken as
// the bearer token is, and a wrong one is 401.
func TestTokenInTheQuery(t *testing.T) {
	nd := startNode(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, c := range []struct {
		token string
		want  int
	}{{nd.token("alice", "browser"), http.StatusSwitchingProtocols}, {"nope", http.StatusUnauthorized}} {
		u := nd.url() + "?attempt=1&token=" + url.QueryEscape(c.token)
		ws, res, err := websocket.Dial(ctx, u, &websocket.DialOptions{Subprotocols: []string{ProtoJSON}})
		if res == nil || res.StatusCode != c.want {
			t.Fatalf("token %q: %v %v, want %d", c.token, res, err, c.want)
		}
		if ws != nil {
			if _, b, err := ws.Read(ctx); err != nil || len(b) == 0 || ws.Subprotocol() != ProtoJSON {
				t.Fatalf("hello: %q %v, subprotocol %q", b, err, ws.Subprotocol())
			}
			ws.Close(websocket.StatusNormalClosure, "")
		}
		http.DefaultClient.CloseIdleConnections()
	}
}
