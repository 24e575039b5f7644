package chaos

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/presence-im/presence/client"
	"github.com/presence-im/presence/internal/pgtest"
)

// The store as a fault: the nodes share one PostgreSQL (the project's own
// test server, internal/pgtest), which is stopped, paused or slowed for
// StoreFaultFor while devices stay connected, some leave and some
// reconnect through it. Nothing may show that is not so: no offline of a
// connected device, no ghost, no handshake accepted without its attempt
// floor in the store (a refused one gets 503 with Retry-After and tries
// again), and every departure's last seen in the store once it is back.

// StoreFaultFor is how long the store stays stopped, paused or slow.
const StoreFaultFor = 15 * time.Second

// StoreSlowDelay is store-slow's delay of each chunk through the proxy:
// every round trip to PostgreSQL takes at least twice it.
const StoreSlowDelay = 300 * time.Millisecond

// pgStore is a round's PostgreSQL and, for store-slow, the proxy the nodes
// reach it through.
type pgStore struct {
	pg    *pgtest.Instance
	proxy *Proxy
	dsn   string // the nodes'
}

// isStoreScenario: the scenarios that run on PostgreSQL.
func isStoreScenario(name string) bool { return strings.HasPrefix(name, "store-") }

// ProcessOnly reports whether the scenario runs on the process backend
// only (the store scenarios: their PostgreSQL is internal/pgtest's).
func ProcessOnly(name string) bool { return isStoreScenario(name) }

// startStore starts the round's PostgreSQL in dir/pg (and the proxy for
// store-slow) and returns the nodes' DSN.
func (e *Env) startStore(dir, scenario string) error {
	pgDir := filepath.Join(dir, "pg")
	if err := os.MkdirAll(pgDir, 0o755); err != nil {
		return err
	}
	pg, err := pgtest.Launch(pgDir, "fsync=off")
	if err != nil {
		return err
	}
	s := &pgStore{pg: pg, dsn: pg.DSN}
	if scenario == "store-slow" {
		if s.proxy, err = NewProxy(fmt.Sprintf("127.0.0.1:%d", pg.Port)); err != nil {
			_ = pg.Stop()
			return err
		}
		s.dsn = strings.Replace(pg.DSN, fmt.Sprintf("127.0.0.1:%d", pg.Port), s.proxy.Addr, 1)
	}
	e.store = s
	e.Cluster.Args = append(e.Cluster.Args, "--policy-dsn", s.dsn)
	return nil
}

// stopStore ends the round's PostgreSQL, if any (after the nodes).
func (e *Env) stopStore() {
	if e.store == nil {
		return
	}
	if e.store.proxy != nil {
		e.store.proxy.Close()
	}
	_ = e.store.pg.Signal(syscall.SIGCONT) // a paused one cannot stop
	_ = e.store.pg.Stop()
}

// storeFault is how a scenario breaks the store and mends it.
type storeFault struct {
	name, what  string
	start, stop func(s *pgStore) error
}

var storeFaults = map[string]storeFault{
	"store-down": {"stop", "PostgreSQL stopped (immediate)", func(s *pgStore) error { return s.pg.Stop() }, func(s *pgStore) error { return s.pg.Start() }},
	"store-pause": {"pause", "PostgreSQL paused (SIGSTOP of the server and its backends)",
		func(s *pgStore) error { return s.pg.Signal(syscall.SIGSTOP) }, func(s *pgStore) error { return s.pg.Signal(syscall.SIGCONT) }},
	"store-slow": {"slow", fmt.Sprintf("PostgreSQL behind a proxy delaying each chunk %v", StoreSlowDelay),
		func(s *pgStore) error { s.proxy.SetDelay(StoreSlowDelay); return nil }, func(s *pgStore) error { s.proxy.SetDelay(0); return nil }},
}

// tries counts the handshakes of the devices reconnecting through the fault.
type tries struct {
	mu                           sync.Mutex
	refused, accepted, noRetryAt int
	other                        []string
	attempts                     map[*Device]uint64 // the accepted attempt
}

// runStore is the scenario name of storeFaults.
func runStore(name string) func(ctx context.Context, e *Env, r *Round) error {
	return func(ctx context.Context, e *Env, r *Round) error { return runStoreFault(ctx, e, r, storeFaults[name]) }
}

func runStoreFault(ctx context.Context, e *Env, r *Round, f storeFault) error {
	var leavers, movers []*Device
	for _, n := range e.Cluster.Nodes {
		if ds := e.devicesOn(n); len(ds) >= 3 {
			leavers, movers = append(leavers, ds[0]), append(movers, ds[1])
		}
	}
	stayed := e.othersThan(append(append([]*Device{}, leavers...), movers...))
	r.Fault = fmt.Sprintf("%s for %v: %d devices leave and %d reconnect through it, %d stay", f.what, StoreFaultFor, len(leavers), len(movers), len(stayed))
	t0 := time.Now()
	e.Cluster.marks.add("", "store "+f.name)
	if err := f.start(e.store); err != nil {
		return err
	}
	time.Sleep(time.Second) // the nodes' calls meet it
	left := time.Now()
	for _, d := range append(append([]*Device{}, leavers...), movers...) {
		d.Close()
	}
	tr := &tries{attempts: map[*Device]uint64{}}
	var wg sync.WaitGroup
	until := t0.Add(StoreFaultFor + 30*time.Second)
	for _, d := range movers {
		wg.Add(1)
		go func() { defer wg.Done(); e.reconnect(ctx, d, until, tr) }()
	}
	time.Sleep(time.Until(t0.Add(StoreFaultFor)))
	during := tr.snapshot()
	e.Cluster.marks.add("", "store back")
	if err := f.stop(e.store); err != nil {
		return err
	}
	mended := time.Now()
	wg.Wait()
	r.Notes = append(r.Notes, fmt.Sprintf("during the fault: %d handshakes refused (503), %d accepted; after it, all: %d refused, %d accepted",
		during.refused, during.accepted, tr.refused, tr.accepted))
	if tr.noRetryAt > 0 {
		r.find("no_retry_after", "", "", fmt.Sprintf("%d handshakes refused 503 without Retry-After", tr.noRetryAt))
	}
	for _, o := range tr.other {
		r.find("handshake_error", "", "", o)
	}
	e.awaitOffline(r, e.Fleet.Watchers, leavers, func(*Device) time.Time { return left }, e.fixed("graceful_close"),
		left.Add(ms(e.Bounds["graceful_close_ms"])+e.Slack))
	time.Sleep(store2s(e))
	e.checkStayed(r, e.Fleet.Watchers, stayed, t0)
	e.checkFloors(ctx, r, tr)
	e.checkLastSeen(ctx, r, leavers, left, mended)
	e.checkStoreMetrics(ctx, r)
	e.checkStoreLog(r)
	e.checkRoutes(ctx, r, e.Cluster.Nodes[0], leavers, e.othersThan(leavers))
	e.checkFinal(r, e.Fleet.Watchers, leavers, e.othersThan(leavers))
	return nil
}

// store2s is a settle after the store is back: kept last seens are retried
// store.RetryEvery apart, and a moved view answers unknown until settle.
func store2s(e *Env) time.Duration { return max(3*time.Second, ms(e.Timing["settle_ms"])) }

func (t *tries) snapshot() tries {
	t.mu.Lock()
	defer t.mu.Unlock()
	return tries{refused: t.refused, accepted: t.accepted}
}

// reconnect connects d again, as a client would: a 503 is tried again
// after its Retry-After, with a new attempt, until accepted or until. ctx
// is the round's: the connection heartbeats until it ends.
func (e *Env) reconnect(ctx context.Context, d *Device, until time.Time, t *tries) {
	for ctx.Err() == nil && time.Now().Before(until) {
		wait := time.Second
		err := e.Fleet.Connect(ctx, d)
		t.mu.Lock()
		var he *client.HandshakeError
		switch {
		case err == nil:
			t.accepted++
			t.attempts[d] = d.attempt
			t.mu.Unlock()
			return
		case errors.As(err, &he) && he.Status == http.StatusServiceUnavailable:
			t.refused++
			if he.RetryAfter <= 0 {
				t.noRetryAt++
			}
			wait = max(he.RetryAfter, 100*time.Millisecond)
		default:
			t.other = append(t.other, fmt.Sprintf("%s: %v", d.User, err))
		}
		t.mu.Unlock()
		time.Sleep(wait)
	}
	t.mu.Lock()
	t.other = append(t.other, d.User+": not connected again")
	t.mu.Unlock()
}

// pgQuery runs one query on the round's PostgreSQL directly.
func (e *Env) pgQuery(ctx context.Context, q string, args []any, scan func(pgx.Rows) error) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, e.store.pg.DSN)
	if err != nil {
		return err
	}
	defer c.Close(ctx)
	rows, err := c.Query(ctx, q, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := scan(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}

// checkFloors: every accepted handshake's attempt is at most its device's
// floor in the store (never accepted without it).
func (e *Env) checkFloors(ctx context.Context, r *Round, t *tries) {
	for d, attempt := range t.attempts {
		var floor int64
		err := e.pgQuery(ctx, `SELECT attempt FROM presence_floors WHERE user_id = $1 AND device = 'phone'`, []any{d.User},
			func(rows pgx.Rows) error { return rows.Scan(&floor) })
		switch {
		case err != nil:
			r.find("store_unread", d.User, "", err.Error())
		case uint64(floor) < attempt:
			r.find("floor_not_durable", d.User, "", fmt.Sprintf("handshake accepted with attempt %d, the store's floor %d", attempt, floor))
		}
	}
}

// checkLastSeen: each device that left during the fault has its last seen
// in the store once it is back, no earlier than its departure.
func (e *Env) checkLastSeen(ctx context.Context, r *Round, leavers []*Device, left, mended time.Time) {
	for _, d := range leavers {
		var at int64
		var err error
		for end := time.Now().Add(10 * time.Second); ; {
			at = 0
			err = e.pgQuery(ctx, `SELECT at_ms FROM presence_last_seen WHERE user_id = $1`, []any{d.User},
				func(rows pgx.Rows) error { return rows.Scan(&at) })
			if err == nil && at >= left.Add(-time.Second).UnixMilli() || time.Now().After(end) {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		if err != nil {
			r.find("store_unread", d.User, "", err.Error())
		} else if at < left.Add(-time.Second).UnixMilli() {
			r.find("last_seen_lost", d.User, "", fmt.Sprintf("last seen in the store %v, the device left at %s (store back at %s)",
				time.UnixMilli(at).Format("15:04:05.000"), left.Format("15:04:05.000"), mended.Format("15:04:05.000")))
		}
	}
}

// checkStoreMetrics notes what each node counted of the fault and finds a
// kept last seen still pending or lost.
func (e *Env) checkStoreMetrics(ctx context.Context, r *Round) {
	for _, n := range e.Cluster.Nodes {
		m, err := n.metrics(ctx)
		if err != nil {
			r.find("no_metrics", "", "", fmt.Sprintf("%s: %v", n.ID, err))
			continue
		}
		kept, pending, lost := m[`presence_store_last_seen_kept_total{store="postgres"}`], m[`presence_store_last_seen_pending{store="postgres"}`], m[`presence_store_last_seen_lost_total{store="postgres"}`]
		errs := 0.0
		for k, v := range m {
			if strings.HasPrefix(k, "presence_store_errors_total{") {
				errs += v
			}
		}
		r.Notes = append(r.Notes, fmt.Sprintf("%s: %.0f store errors, %.0f last seens kept through a failed commit, %.0f pending, %.0f lost, 503s %.0f",
			n.ID, errs, kept, pending, lost, m[`presence_ws_handshakes_total{status="503"}`]))
		if pending > 0 || lost > 0 {
			r.find("last_seen_pending", "", "", fmt.Sprintf("%s: %.0f last seens pending, %.0f lost after the store came back", n.ID, pending, lost))
		}
		for k, v := range m {
			if strings.HasPrefix(k, "presence_store_failing{") && v != 0 {
				r.find("store_still_failing", "", "", fmt.Sprintf("%s: %s = %v after the store came back", n.ID, k, v))
			}
		}
	}
}

// checkStoreLog: a node says the store is failing once per burst and
// operation (its start, a sum a minute, its end), never once per call;
// no node fences for it, with the lease strategy either (--node-flags
// "--split-brain lease": the arbiter is asked only when a member is
// unreachable, and then falls back to the majority rule).
func (e *Env) checkStoreLog(r *Round) {
	for _, n := range e.Cluster.Nodes {
		lines := 0
		for _, l := range strings.Split(n.Log(), "\n") {
			if strings.Contains(l, "store: ") && (strings.Contains(l, "failing") || strings.Contains(l, "works again")) {
				lines++
			}
			if strings.Contains(l, "fenced: closing devices") {
				r.find("fenced", "", "", fmt.Sprintf("%s fenced during a store fault: %s", n.ID, l))
			}
		}
		r.Notes = append(r.Notes, fmt.Sprintf("%s: %d log lines about the store", n.ID, lines))
		if lines > 40 {
			r.find("log_flood", "", "", fmt.Sprintf("%s logged %d lines about the store in one fault", n.ID, lines))
		}
	}
}

// metrics reads n's /metrics as name{labels} -> value.
func (n *Node) metrics(ctx context.Context) (map[string]float64, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+n.Admin+"/metrics", nil)
	if n.Token != "" {
		req.Header.Set("Authorization", "Bearer "+n.Token)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		l := sc.Text()
		if l == "" || l[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(l, ' ')
		if v, err := strconv.ParseFloat(l[i+1:], 64); err == nil && i > 0 {
			out[l[:i]] = v
		}
	}
	return out, sc.Err()
}
