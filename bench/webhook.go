package bench

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/presence-im/presence/webhook"
)

// benchHookSecret signs the bench's webhooks (--webhook).
const benchHookSecret = "loadbench-webhook-secret-0123456789"

// hookSink is the bench's webhook receiver (--webhook): presenced's one
// endpoint, on loopback in the orchestrator; it answers 200 to every
// batch and counts the events, without checking signatures (a backend
// would: client.VerifyWebhook; the cost measured is presence's).
type hookSink struct {
	srv           *http.Server
	url           string
	posts, events atomic.Int64
	malformed     atomic.Int64
}

func startHookSink() (*hookSink, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	h := &hookSink{url: "http://" + ln.Addr().String() + "/presence"}
	h.srv = &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var b webhook.Batch
		if err := json.NewDecoder(r.Body).Decode(&b); err != nil {
			h.malformed.Add(1)
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		h.posts.Add(1)
		h.events.Add(int64(len(b.Events)))
	})}
	go func() { _ = h.srv.Serve(ln) }()
	return h, nil
}

func (h *hookSink) close() { _ = h.srv.Close() }

// webhooks says what the receiver got and what the nodes counted.
func (s *presenceSys) webhooks() string {
	if s.hooks == nil {
		return ""
	}
	m, err := s.metrics("presence_webhook_")
	if err != nil {
		return err.Error()
	}
	return fmt.Sprintf("webhook: the receiver got %d events in %d POSTs (%d malformed); the nodes: %.0f queued, %.0f delivered, %.0f retried, %.0f refused, %.0f dropped",
		s.hooks.events.Load(), s.hooks.posts.Load(), s.hooks.malformed.Load(),
		sum(m, "presence_webhook_queued_total"), sum(m, "presence_webhook_delivered_total"), sum(m, "presence_webhook_retried_total"),
		sum(m, "presence_webhook_failed_total"), sum(m, "presence_webhook_dropped_total"))
}
