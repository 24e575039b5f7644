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
	"sync"
	"sync/atomic"
	"time"

	"github.com/presence-im/presence/store"
)

// endpoint is one receiver's delivery on this node: Workers goroutines,
// worker w taking the shards s with s % Workers == w, each with its
// backlog in memory.
type endpoint struct {
	h      *Hooks
	e      Endpoint
	key    string
	label  string
	wake   []chan struct{} // one per worker
	oldest []atomic.Int64  // per worker: at_ms of the oldest change it is sending (0: none)
	// fromStore, per worker: rows may wait in the store that its backlog
	// does not hold (left there over the bound, claimed, from before a
	// restart, or a delivery not marked): read them once the backlog is
	// empty.
	fromStore []atomic.Bool
	state     atomic.Value // string: ok, retrying, failing
	last      atomic.Value // string: the last error
	fails     burst

	mu     sync.Mutex
	queues []*backlog // per worker
}

func newEndpoint(h *Hooks, e Endpoint) *endpoint {
	n := h.cfg.Limits.Workers
	ep := &endpoint{h: h, e: e, key: e.Key(), label: e.Label(), oldest: make([]atomic.Int64, n), fromStore: make([]atomic.Bool, n)}
	for w := range n {
		ep.wake = append(ep.wake, make(chan struct{}, 1))
		ep.queues = append(ep.queues, newBacklog())
		ep.fromStore[w].Store(true) // this node's rows from before it started
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

// storeHas marks every worker's rows in the store as worth a read, and
// wakes them.
func (ep *endpoint) storeHas() {
	for w := range ep.fromStore {
		ep.fromStore[w].Store(true)
	}
	ep.notify()
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

func (ep *endpoint) workerOf(user string) int { return shardOf(user) % len(ep.queues) }

// enqueue adds written changes to the workers' backlogs. Over MaxBacklog
// a user's waiting changes are replaced by her newest, or, for a user with
// none waiting, the changes of the user waiting longest in the fullest
// backlog are left to her row in the store (written before: it holds her
// latest). Either is counted as coalesced.
func (ep *endpoint) enqueue(chains map[string][]item) {
	limit := ep.h.cfg.Limits.MaxBacklog
	ep.mu.Lock()
	held, added, merged := ep.held(), 0, 0
	for u, c := range chains {
		q := ep.queues[ep.workerOf(u)]
		for _, it := range c {
			added++
			switch {
			case held < limit:
				q.add(it)
				held++
			case q.has(u):
				n := q.replace(it)
				merged += n
				held += 1 - n
			default:
				held -= ep.spill() // counted there
				q.add(it)
				held++
			}
		}
	}
	ep.mu.Unlock()
	ep.h.m.queued.WithLabelValues(ep.label).Add(float64(added))
	ep.h.m.coalesced.WithLabelValues(ep.label).Add(float64(merged))
	ep.notify()
}

// held is the changes in the backlogs; the caller holds mu.
func (ep *endpoint) held() int {
	n := 0
	for _, q := range ep.queues {
		n += q.n
	}
	return n
}

// spill leaves the changes of the user waiting longest in the fullest
// backlog to the store; the caller holds mu.
func (ep *endpoint) spill() int {
	w := 0
	for i, q := range ep.queues {
		if q.n > ep.queues[w].n {
			w = i
		}
	}
	n := ep.queues[w].spill()
	if n > 0 {
		ep.fromStore[w].Store(true)
		ep.h.m.coalesced.WithLabelValues(ep.label).Add(float64(n))
	}
	return n
}

// backlogLen is the changes this endpoint holds in memory, not yet sent.
func (ep *endpoint) backlogLen() int {
	ep.mu.Lock()
	defer ep.mu.Unlock()
	return ep.held()
}

// work sends worker w's changes, a batch at a time: the one in flight
// again until the receiver takes or refuses it, then the next from its
// backlog, then, with the backlog empty, its rows waiting in the store. A
// user's changes go out in version order.
func (ep *endpoint) work(w int) {
	l := ep.h.cfg.Limits
	backoff := l.BackoffMin
	var b []item
	lastRead := time.Time{}
	for {
		if b == nil {
			b = ep.next(w, &lastRead)
		}
		wait, wake := l.Poll, ep.wake[w]
		if b != nil {
			ep.oldest[w].Store(b[0].AtMs)
			again, err := ep.send(b)
			if err == nil {
				b, backoff = nil, l.BackoffMin
				continue
			}
			// A failing receiver waits out its back-off: new changes do
			// not wake the worker before it.
			wait, backoff, wake = ep.h.retry(backoff, again), min(2*backoff, l.BackoffMax), nil
		} else {
			ep.oldest[w].Store(0)
		}
		select {
		case <-ep.h.ctx.Done():
			return
		case <-wake:
		case <-time.After(wait):
		}
	}
}

// next is worker w's next batch (nil: none): from its backlog, else its
// rows in the store when some may wait there or Poll has passed since the
// last read. Both under the read lock of writing: a row read with the
// backlog empty has none of its changes in memory, so none is sent after
// a later one.
func (ep *endpoint) next(w int, lastRead *time.Time) []item {
	l := ep.h.cfg.Limits
	ep.h.writing.RLock()
	defer ep.h.writing.RUnlock()
	ep.mu.Lock()
	b := ep.queues[w].take(l.MaxBatch)
	ep.mu.Unlock()
	if len(b) > 0 {
		return b
	}
	if !ep.fromStore[w].Swap(false) && time.Since(*lastRead) < l.Poll {
		return nil
	}
	*lastRead = time.Now()
	ctx, cancel := context.WithTimeout(ep.h.ctx, l.Timeout)
	defer cancel()
	rows, err := ep.h.cfg.Store.PendingHooks(ctx, ep.key, ep.h.cfg.Node, ep.shards(w), l.MaxBatch)
	if err != nil || len(rows) == l.MaxBatch { // more may wait
		ep.fromStore[w].Store(true)
	}
	if err != nil {
		ep.h.m.storeErrors.Inc()
	}
	for _, r := range rows {
		b = append(b, item{User: r.User, Version: r.Version, AtMs: r.AtMs, Online: online(r.Body), Body: r.Body})
	}
	return b
}

// retry is the wait before a failed batch is sent again: drawn from
// [0, backoff) (full jitter), or the receiver's Retry-After when that is
// longer (at most maxRetryAfter).
func (h *Hooks) retry(backoff, after time.Duration) time.Duration {
	h.rndMu.Lock()
	defer h.rndMu.Unlock()
	return retryWait(h.cfg.Rand, backoff, after)
}

func retryWait(r *rand.Rand, backoff, after time.Duration) time.Duration {
	return max(time.Duration(r.Int64N(int64(backoff))), min(after, maxRetryAfter))
}

// maxRetryAfter caps a receiver's Retry-After: a worker waits no longer.
const maxRetryAfter = 10 * time.Minute

// errRetry is a delivery to try again; a refusal (another 4xx) is not.
type errRetry struct {
	err   error
	after time.Duration // the receiver's Retry-After (0: none)
}

func (e errRetry) Error() string { return e.err.Error() }

// send POSTs a batch and, once the receiver took it (2xx) or refused it
// for good (a 4xx but 429), marks its users' rows delivered up to the
// versions sent; the wait the receiver asked for comes back with an error
// to retry.
func (ep *endpoint) send(b []item) (time.Duration, error) {
	body, id := batchOf(ep.key, b)
	err := ep.post(body, id)
	m := ep.h.m
	if re, ok := err.(errRetry); ok {
		m.retried.WithLabelValues(ep.label).Add(float64(len(b)))
		ep.state.Store("retrying")
		ep.last.Store(re.Error())
		return re.after, err
	}
	if err != nil {
		m.failed.WithLabelValues(ep.label).Add(float64(len(b)))
		ep.state.Store("failing")
		ep.last.Store(err.Error())
		ep.fails.note(ep.h.cfg.Log, "webhook: the receiver refused a batch: dropped, not retried", "endpoint", ep.label, "err", err)
	} else {
		m.delivered.WithLabelValues(ep.label).Add(float64(len(b)))
		m.batch.Observe(float64(len(b)))
		ep.state.Store("ok")
	}
	ep.done(b, err == nil)
	return 0, nil
}

// done marks the rows of a batch's users delivered up to the highest
// version sent of each: an online user's row stays, as what the receiver
// knows of her; an offline user's goes, as does every row refused.
func (ep *endpoint) done(b []item, taken bool) {
	keys := make([]store.HookKey, 0, len(b))
	at := map[string]int{}
	for _, it := range b {
		k := store.HookKey{User: it.User, Version: it.Version, Keep: taken && it.Online}
		if i, ok := at[it.User]; ok {
			keys[i] = k // a later change of the same user: a higher version
			continue
		}
		at[it.User] = len(keys)
		keys = append(keys, k)
	}
	ctx, cancel := context.WithTimeout(ep.h.ctx, ep.h.cfg.Limits.Timeout)
	defer cancel()
	if err := ep.h.cfg.Store.DoneHooks(ctx, ep.key, keys); err != nil {
		ep.h.m.storeErrors.Inc()
		ep.storeHas() // delivered again from the store later: a duplicate, harmless
	}
}

// online reports whether an event's body says its user is online.
func online(body []byte) bool {
	var ev struct{ Status string }
	return json.Unmarshal(body, &ev) == nil && ev.Status == "online"
}

// batchOf is the body of a batch and its delivery id: a hash of its users
// and versions, so a batch sent again has the same id.
func batchOf(key string, b []item) ([]byte, string) {
	bt := Batch{Events: make([]json.RawMessage, len(b))}
	h := sha256.New()
	h.Write([]byte(key))
	for i, it := range b {
		bt.Events[i] = it.Body
		fmt.Fprintf(h, "\n%s/%d", it.User, it.Version)
	}
	body, _ := json.Marshal(bt)
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

// oldestAge is how long the oldest change this node is sending has
// waited.
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
