// Package dashboard is the cluster dashboard: plain HTML, JS and CSS
// embedded in the binary and served by the admin API at GET /. The page
// replays GET /api/history (what happened before it opened: events, the
// membership timeline, actors over time), draws its charts as SVG itself
// (charts.js: offline latency per leave mode against its bound;
// connections, actors, events and lease renewals over the last minutes),
// polls GET /api/cluster (members, every node's live actors and renewal
// counters), pages through one node's actors with their state
// (actors.js, GET /api/actors), streams
// GET /api/events (device ups and downs, published changes with their
// latency, member changes, from every node) and looks users up through
// GET /api/presence and /api/route. With an admin token, open it as
// /#token=TOKEN: the page sends it as a bearer token and, for the event
// stream (EventSource cannot set headers), as ?token=.
package dashboard

import (
	"embed"
	"io/fs"
	"net/http"
)

//go:embed static
var files embed.FS

// Handler serves the page at / and its assets under /static/.
func Handler() http.Handler {
	static, _ := fs.Sub(files, "static")
	mux := http.NewServeMux()
	mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-cache")
		http.ServeFileFS(w, r, static, "index.html")
	})
	return mux
}
