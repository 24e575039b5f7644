package gateway

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"time"

	sdk "github.com/presence-im/presence/client/js"
)

// asset is one embedded file served with its content hash as ETag.
type asset struct {
	name, contentType, etag string
	body                    []byte
}

func newAsset(name, contentType string) asset {
	b, err := sdk.Files.ReadFile(name)
	if err != nil {
		panic("gateway: " + name + " is not embedded: " + err.Error()) // a build without it is broken
	}
	sum := sha256.Sum256(b)
	return asset{name: name, contentType: contentType, etag: `"` + hex.EncodeToString(sum[:16]) + `"`, body: b}
}

// The browser SDK (client/js), read once.
var (
	sdkJS    = newAsset("presence.js", "text/javascript; charset=utf-8")
	sdkTypes = newAsset("presence.d.ts", "application/typescript; charset=utf-8")
)

// routes adds what the device listener serves besides /ws: the browser
// SDK at /sdk/presence.js and /sdk/presence.d.ts, and the demo
// (demo.go).
func (s *Server) routes(mux *http.ServeMux) {
	mux.HandleFunc("GET /sdk/presence.js", serveAsset(sdkJS))
	mux.HandleFunc("GET /sdk/presence.d.ts", serveAsset(sdkTypes))
	s.demoRoutes(mux)
}

// serveAsset answers a with its ETag; http.ServeContent answers an
// If-None-Match that names it with 304. no-cache: revalidated on each
// use, so a page picks up a node's new SDK at once. Any origin may load
// it (a module script from another origin is fetched with CORS).
func serveAsset(a asset) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Type", a.contentType)
		h.Set("ETag", a.etag)
		h.Set("Cache-Control", "no-cache")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Access-Control-Allow-Origin", "*")
		http.ServeContent(w, r, a.name, time.Time{}, bytes.NewReader(a.body))
	}
}
