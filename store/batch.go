package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// ErrQueueFull is a write refused because the store's write queue is full:
// the caller answers with a retry (a handshake gets 503 and Retry-After),
// and nothing of it is written.
var ErrQueueFull = errors.New("store: write queue full: retry later")

// ErrClosed is a write after the store was closed.
var ErrClosed = errors.New("store: closed")

// Write is one history write: an attempt floor raise (Device set) or a
// last-seen time (Device empty).
type Write struct {
	User, Device string
	Attempt      uint64
	At           time.Time
	// Take, on a floor: write Attempt only if it is above the stored
	// floor, and say in Take whether it was, and otherwise the floor that
	// stands (FloorTaker). The commit fills it before the writer hears.
	Take *Taken
}

// Taken is what a taken floor found (Write.Take).
type Taken struct {
	OK    bool   // the attempt was above the floor and is the floor now
	Floor uint64 // when not OK, the stored floor (at least the attempt)
}

// Commit applies writes in one transaction: all or none.
type Commit func(ctx context.Context, ws []Write) error

// Default bounds of a Batcher.
const (
	DefaultWriteQueue = 4096 // writes waiting for a commit
	DefaultMaxBatch   = 512  // writes in one transaction
)

// Batcher is a store's single writer: callers queue writes on a bounded
// queue and wait for the commit of the batch theirs went into, so a floor is
// durable before the handshake that raised it is answered, yet a burst of
// connects or disconnects costs one commit per batch rather than one per
// write. While one commit runs, the next batch gathers: no write waits for a
// timer.
//
// A last seen that finds the queue full is not refused: it is kept, one per
// user (the latest wins, as in the table), and written in the batches after
// the queue's, so a mass disconnect loses none; what it holds is at most one
// entry per user who went offline meanwhile, and Do returns before its
// commit. A floor that finds the queue full is refused (ErrQueueFull): its
// handshake must not be answered before it is durable.
//
// A last seen whose commit fails (the store stopped, paused past the
// commit's deadline, read-only) is kept the same way and written again once
// a retry commits, RetryEvery apart while the store fails: a store that
// goes away loses none, and presence_store_last_seen_pending says how many
// wait for it. Only a Close while the store still fails gives them up,
// counted in presence_store_last_seen_lost_total.
type Batcher struct {
	commit   Commit
	maxBatch int
	q        chan pending
	mu       sync.RWMutex // held for reading while queueing; closed under it
	closed   bool
	quit     chan struct{}
	done     chan struct{}

	seenMu sync.Mutex
	seen   map[string]seenAt // last seens kept to write next (queue full, Keep, a failed commit)
	kick   chan struct{}     // the writer has seen to do

	written, failed, refused prometheus.Counter
	deferred, kept, lost     prometheus.Counter
	pending                  prometheus.GaugeFunc
	batch, latency           prometheus.Histogram
}

// RetryEvery is how long the writer waits before it tries the kept last
// seens again after a failed commit.
const RetryEvery = time.Second

type pending struct {
	w      Write
	res    chan error
	failed bool // a kept last seen whose commit failed before: counted kept once
}

// seenAt is a kept last seen; failed: a commit of it failed (counted in
// presence_store_last_seen_kept_total).
type seenAt struct {
	at     time.Time
	failed bool
}

// NewBatcher starts the writer of the store named name (a metric label);
// queue and maxBatch <= 0 take the defaults.
func NewBatcher(name string, commit Commit, queue, maxBatch int) *Batcher {
	if queue <= 0 {
		queue = DefaultWriteQueue
	}
	if maxBatch <= 0 {
		maxBatch = DefaultMaxBatch
	}
	l := prometheus.Labels{"store": name}
	b := &Batcher{
		commit: commit, maxBatch: maxBatch, q: make(chan pending, queue), quit: make(chan struct{}), done: make(chan struct{}),
		seen: map[string]seenAt{}, kick: make(chan struct{}, 1),
		written:  prometheus.NewCounter(prometheus.CounterOpts{Name: "presence_store_writes_total", Help: "History writes committed.", ConstLabels: l}),
		failed:   prometheus.NewCounter(prometheus.CounterOpts{Name: "presence_store_write_failures_total", Help: "History writes whose commit failed.", ConstLabels: l}),
		refused:  prometheus.NewCounter(prometheus.CounterOpts{Name: "presence_store_writes_refused_total", Help: "History writes refused: write queue full or store closed.", ConstLabels: l}),
		deferred: prometheus.NewCounter(prometheus.CounterOpts{Name: "presence_store_writes_deferred_total", Help: "Last seens that found the write queue full, kept (latest per user) and written after it.", ConstLabels: l}),
		kept: prometheus.NewCounter(prometheus.CounterOpts{Name: "presence_store_last_seen_kept_total",
			Help: "Last seens whose commit failed, kept (latest per user) and written again once the store answers.", ConstLabels: l}),
		lost: prometheus.NewCounter(prometheus.CounterOpts{Name: "presence_store_last_seen_lost_total",
			Help: "Kept last seens given up because the store still failed when it was closed.", ConstLabels: l}),
		batch: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "presence_store_batch_writes", Help: "Writes per committed transaction.",
			ConstLabels: l, Buckets: prometheus.ExponentialBuckets(1, 4, 6)}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "presence_store_commit_seconds", Help: "Time of one transaction of writes.",
			ConstLabels: l, Buckets: prometheus.ExponentialBuckets(0.0005, 4, 8)}),
	}
	b.pending = prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "presence_store_last_seen_pending",
		Help: "Last seens kept (the write queue full, or their commit failed) and not written yet.", ConstLabels: l}, b.seenCount)
	go b.loop()
	return b
}

// Collectors are the writer's metrics, to register.
func (b *Batcher) Collectors() []prometheus.Collector {
	return []prometheus.Collector{b.written, b.failed, b.refused, b.deferred, b.kept, b.lost, b.pending, b.batch, b.latency}
}

// Do queues w and waits for its commit. A full queue answers ErrQueueFull at
// once, but for a last seen, which it keeps to write next (Batcher); ctx
// ending stops the wait, not the write.
func (b *Batcher) Do(ctx context.Context, w Write) error {
	res := make(chan error, 1)
	b.mu.RLock()
	err := ErrClosed
	if !b.closed {
		select {
		case b.q <- pending{w: w, res: res}:
			err = nil
		default:
			err = ErrQueueFull
			if w.Device == "" {
				b.keepSeen(w)
				err = nil
				res <- nil
			}
		}
	}
	b.mu.RUnlock()
	if err != nil {
		b.refused.Inc()
		return err
	}
	select {
	case err := <-res:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Keep hands a last seen (w.Device empty) to the writer without waiting
// for its commit: kept as one that found the queue full (the latest per
// user), written in the writer's next batch and retried while the store
// fails. A departure's caller (a view) so never waits on the store.
func (b *Batcher) Keep(w Write) error {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if b.closed {
		b.refused.Inc()
		return ErrClosed
	}
	b.holdSeen(w, false)
	b.keepGoing()
	return nil
}

// Close commits what is queued and stops the writer.
func (b *Batcher) Close() {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		<-b.done
		return
	}
	b.closed = true
	b.mu.Unlock()
	close(b.quit)
	<-b.done
}

// keepSeen keeps a last seen that found the queue full (the latest per
// user) and wakes the writer.
func (b *Batcher) keepSeen(w Write) {
	b.holdSeen(w, false)
	b.deferred.Inc()
	b.keepGoing()
}

// holdSeen keeps w, the latest per user; failed: its commit failed.
func (b *Batcher) holdSeen(w Write, failed bool) {
	b.seenMu.Lock()
	if k := b.seen[w.User]; w.At.After(k.at) {
		b.seen[w.User] = seenAt{w.At, failed || k.failed}
	} else if failed {
		k.failed = true
		b.seen[w.User] = k
	}
	b.seenMu.Unlock()
}

func (b *Batcher) seenCount() float64 {
	b.seenMu.Lock()
	defer b.seenMu.Unlock()
	return float64(len(b.seen))
}

func (b *Batcher) loop() {
	defer close(b.done)
	batch := make([]pending, 0, b.maxBatch)
	var retry <-chan time.Time // armed while kept last seens wait for a failing store
	for {
		select {
		case p := <-b.q:
			batch = append(batch[:0], p)
		case <-b.kick:
			batch = batch[:0]
		case <-retry:
			batch, retry = batch[:0], nil
		case <-b.quit:
			b.drain(batch[:0])
			return
		}
		ok := true
		if batch = b.takeSeen(b.gather(batch)); len(batch) > 0 {
			ok = b.run(batch)
		}
		switch {
		case !b.seenLeft():
		case ok:
			b.keepGoing()
		case retry == nil:
			retry = time.After(RetryEvery)
		}
	}
}

// drain commits what is left at Close (no Do queues any more: closed under
// mu). A store that still fails then gets no more tries: the queued floors
// are answered with the error, the kept last seens given up and counted.
func (b *Batcher) drain(batch []pending) {
	for len(b.q) > 0 || b.seenLeft() {
		if b.run(b.takeSeen(b.gather(batch[:0]))) {
			continue
		}
		for len(b.q) > 0 {
			if p := <-b.q; p.res != nil {
				p.res <- ErrClosed
			}
		}
		b.seenMu.Lock()
		b.lost.Add(float64(len(b.seen)))
		b.seen = map[string]seenAt{}
		b.seenMu.Unlock()
		return
	}
}

// takeSeen fills the batch up to maxBatch with kept last seens.
func (b *Batcher) takeSeen(batch []pending) []pending {
	b.seenMu.Lock()
	defer b.seenMu.Unlock()
	for user, k := range b.seen {
		if len(batch) >= b.maxBatch {
			break
		}
		batch = append(batch, pending{w: Write{User: user, At: k.at}, failed: k.failed})
		delete(b.seen, user)
	}
	if len(b.seen) == 0 && len(batch) > 0 && batch[len(batch)-1].res == nil {
		b.seen = map[string]seenAt{} // emptied: a peak's buckets go with it
	}
	return batch
}

func (b *Batcher) seenLeft() bool {
	b.seenMu.Lock()
	defer b.seenMu.Unlock()
	return len(b.seen) > 0
}

// keepGoing wakes the writer again for the kept last seens left.
func (b *Batcher) keepGoing() {
	select {
	case b.kick <- struct{}{}:
	default:
	}
}

// gather adds what is queued now, up to maxBatch.
func (b *Batcher) gather(batch []pending) []pending {
	for len(batch) < b.maxBatch {
		select {
		case p := <-b.q:
			batch = append(batch, p)
		default:
			return batch
		}
	}
	return batch
}

// run commits batch and answers its writers; a failed commit's last seens
// are kept for a retry (their writers get nil: they will be written). It
// reports whether the commit succeeded.
func (b *Batcher) run(batch []pending) bool {
	ws := make([]Write, len(batch))
	for i, p := range batch {
		ws[i] = p.w
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	err := b.commit(ctx, ws)
	cancel()
	if err != nil {
		b.failed.Add(float64(len(ws)))
	} else {
		b.written.Add(float64(len(ws)))
		b.batch.Observe(float64(len(ws)))
		b.latency.Observe(time.Since(start).Seconds())
	}
	if err != nil { // every last seen kept again before any writer hears
		for _, p := range batch {
			if p.w.Device == "" {
				b.holdSeen(p.w, true)
				if !p.failed { // counted once
					b.kept.Inc()
				}
			}
		}
	}
	for _, p := range batch {
		res := err
		if p.w.Device == "" {
			res = nil // written, or kept to be
		}
		if p.res != nil {
			p.res <- res
		}
	}
	return err == nil
}

// TakeFloor checks attempt and, through the batch, makes it user/device's
// floor if it is above the stored one, answering once that is committed
// (FloorTaker).
func (b *Batcher) TakeFloor(ctx context.Context, user, device string, attempt uint64) (Taken, error) {
	if err := CheckAttempt(user, device, attempt); err != nil {
		return Taken{}, err
	}
	var t Taken
	if err := b.Do(ctx, Write{User: user, Device: device, Attempt: attempt, Take: &t}); err != nil {
		return Taken{}, fmt.Errorf("store: take floor of %s/%s: %w", user, device, err)
	}
	return t, nil
}

// RaiseFloor checks attempt and writes it as user/device's floor through
// the batch, answering once it is committed (the floor is durable before
// the handshake is answered).
func (b *Batcher) RaiseFloor(ctx context.Context, user, device string, attempt uint64) error {
	if err := CheckAttempt(user, device, attempt); err != nil {
		return err
	}
	if err := b.Do(ctx, Write{User: user, Device: device, Attempt: attempt}); err != nil {
		return fmt.Errorf("store: raise floor of %s/%s: %w", user, device, err)
	}
	return nil
}
