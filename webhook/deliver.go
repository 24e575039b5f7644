package webhook

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/presence-im/presence/store"
)

// endpoint is one receiver's delivery on this node: Workers goroutines,
// worker w taking the shards s with s % Workers == w.
type endpoint struct {
	h      *Hooks
	e      Endpoint
	key    string
	label  string
	wake   []chan struct{} // one per worker
	oldest []atomic.Int64  // per worker: at_ms of its oldest row seen pending (0: none)
	state  atomic.Value    // string: ok, retrying, failing
	last   atomic.Value    // string: the last error
	fails  burst
}

func newEndpoint(h *Hooks, e Endpoint) *endpoint {
	ep := &endpoint{h: h, e: e, key: e.Key(), label: e.Label(), oldest: make([]atomic.Int64, h.cfg.Limits.Workers)}
	for range h.cfg.Limits.Workers {
		ep.wake = append(ep.wake, make(chan struct{}, 1))
	}
	ep.state.Store("ok")
	ep.last.Store("")
	h.m.endpoint(ep)
	return ep
}

func (ep *endpoint) notify() {
	for _, c := range ep.wake {
		select {
		case c <- struct{}{}:
		default:
		}
	}
}

func (ep *endpoint) shards(w int) []int {
	var s []int
	for i := range Shards {
		if i%len(ep.wake) == w {
			s = append(s, i)
		}
	}
	return s
}

// work delivers this node's rows of its shards, oldest first, one batch at
// a time: a user's changes go out in version order.
func (ep *endpoint) work(w int) {
	l, shards := ep.h.cfg.Limits, ep.shards(w)
	backoff := l.BackoffMin
	for {
		ctx, cancel := context.WithTimeout(ep.h.ctx, l.Timeout)
		rows, err := ep.h.cfg.Store.PendingHooks(ctx, ep.key, ep.h.cfg.Node, shards, l.MaxBatch)
		cancel()
		wait, wake := l.Poll, ep.wake[w]
		switch {
		case err != nil:
			ep.h.m.storeErrors.Inc()
		case len(rows) == 0:
			ep.oldest[w].Store(0)
		default:
			ep.oldest[w].Store(rows[0].AtMs)
			var again time.Duration
			if again, err = ep.send(rows); err == nil {
				backoff = l.BackoffMin
				continue
			}
			// A failing receiver waits out its back-off: new changes do
			// not wake the worker before it.
			wait, wake = max(time.Duration(rand.Int64N(int64(backoff))), min(again, maxRetryAfter)), nil
			backoff = min(2*backoff, l.BackoffMax)
		}
		select {
		case <-ep.h.ctx.Done():
			return
		case <-wake:
		case <-time.After(wait):
		}
	}
}

// maxRetryAfter caps a receiver's Retry-After: a worker waits no longer.
const maxRetryAfter = 10 * time.Minute

// errRetry is a delivery to try again; a refusal (another 4xx) is not.
type errRetry struct {
	err   error
	after time.Duration // the receiver's Retry-After (0: none)
}

func (e errRetry) Error() string { return e.err.Error() }

// send POSTs rows as one batch and, once the receiver took it (2xx) or
// refused it for good (a 4xx but 429), deletes them; the wait the
// receiver asked for comes back with an error to retry.
func (ep *endpoint) send(rows []store.HookRow) (time.Duration, error) {
	body, id := batchOf(ep.key, rows)
	err := ep.post(body, id)
	m := ep.h.m
	if re, ok := err.(errRetry); ok {
		m.retried.WithLabelValues(ep.label).Add(float64(len(rows)))
		ep.state.Store("retrying")
		ep.last.Store(re.Error())
		return re.after, err
	}
	if err != nil {
		m.failed.WithLabelValues(ep.label).Add(float64(len(rows)))
		ep.state.Store("failing")
		ep.last.Store(err.Error())
		ep.fails.note(ep.h.cfg.Log, "webhook: the receiver refused a batch: dropped, not retried", "endpoint", ep.label, "err", err)
	} else {
		m.delivered.WithLabelValues(ep.label).Add(float64(len(rows)))
		m.batch.Observe(float64(len(rows)))
		ep.state.Store("ok")
	}
	done := make([]store.HookKey, len(rows))
	for i, r := range rows {
		// An online user's row stays, as what the receiver knows of it.
		done[i] = store.HookKey{User: r.User, Version: r.Version, Keep: err == nil && online(r.Body)}
	}
	ctx, cancel := context.WithTimeout(ep.h.ctx, ep.h.cfg.Limits.Timeout)
	defer cancel()
	if derr := ep.h.cfg.Store.DoneHooks(ctx, ep.key, done); derr != nil {
		m.storeErrors.Inc() // delivered again later: a duplicate, harmless
	}
	return 0, nil
}

// online reports whether an event's body says its user is online.
func online(body []byte) bool {
	var ev struct{ Status string }
	return json.Unmarshal(body, &ev) == nil && ev.Status == "online"
}

// batchOf is the body of rows and its delivery id: a hash of the rows'
// users and versions, so a batch sent again has the same id.
func batchOf(key string, rows []store.HookRow) ([]byte, string) {
	b := Batch{Events: make([]json.RawMessage, len(rows))}
	h := sha256.New()
	h.Write([]byte(key))
	for i, r := range rows {
		b.Events[i] = r.Body
		fmt.Fprintf(h, "\n%s/%d", r.User, r.Version)
	}
	body, _ := json.Marshal(b)
	return body, hex.EncodeToString(h.Sum(nil)[:16])
}

func (ep *endpoint) post(body []byte, id string) error {
	ctx, cancel := context.WithTimeout(ep.h.ctx, ep.h.cfg.Limits.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, ep.e.URL, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(SignatureHeader, Sign(ep.e.Secret, body, time.Now()))
	req.Header.Set(DeliveryHeader, id)
	res, err := ep.h.cfg.Client.Do(req)
	if err != nil {
		return errRetry{err: err}
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, 1<<16))
	res.Body.Close()
	switch {
	case res.StatusCode >= 200 && res.StatusCode < 300:
		return nil
	case res.StatusCode == http.StatusTooManyRequests || res.StatusCode >= 500:
		return errRetry{err: fmt.Errorf("webhook: %s answered %d", ep.label, res.StatusCode), after: retryAfter(res.Header.Get("Retry-After"))}
	}
	return fmt.Errorf("webhook: %s answered %d", ep.label, res.StatusCode)
}

// retryAfter reads a Retry-After of seconds or an HTTP date (0: none).
func retryAfter(v string) time.Duration {
	if v == "" {
		return 0
	}
	if s, err := strconv.Atoi(v); err == nil && s >= 0 {
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(time.Until(t), 0)
	}
	return 0
}

// oldestAge is how long this node's oldest undelivered row has waited.
func (ep *endpoint) oldestAge() time.Duration {
	var oldest int64
	for i := range ep.oldest {
		if v := ep.oldest[i].Load(); v > 0 && (oldest == 0 || v < oldest) {
			oldest = v
		}
	}
	if oldest == 0 {
		return 0
	}
	return time.Since(time.UnixMilli(oldest))
}
