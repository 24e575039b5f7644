package bench

import (
	"bytes"
	"context"
	"errors"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/presence-im/presence/client"
	"github.com/presence-im/presence/config"
	"github.com/presence-im/presence/store/sqlite"
)

// buildBinaries builds presenced and cmd/bench (whose peer and worker
// commands the run starts) into dir.
func buildBinaries(t *testing.T, dir string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "go", "build", "-o", dir+"/",
		"github.com/presence-im/presence/cmd/presenced", "github.com/presence-im/presence/cmd/bench").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
}

// centrifugoBinary is the repository's bin/centrifugo or one on PATH, as
// `make centrifugo` installs it (a go install of minutes, too long for
// make test to pay on a fresh machine); "" where there is none.
func centrifugoBinary(t *testing.T) string {
	t.Helper()
	if p, err := filepath.Abs("../bin/centrifugo"); err == nil {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	p, _ := exec.LookPath("centrifugo")
	return p
}

// TestBenchSmoke is `make bench` in small: the three systems (Centrifugo
// where `make centrifugo` installed it), 4,200 devices
// from three load processes (fewer rarely met nbio's stray deadline), seconds per phase. Every row must
// have a figure, every subscriber (in two of the processes) its offline
// event (Centrifugo: the leave), and no connection may end without the load asking.
func TestBenchSmoke(t *testing.T) {
	redis, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatal("no redis-server: `make tools` installs Debian's redis-server")
	}
	centrifugo := centrifugoBinary(t)
	dir := t.TempDir()
	buildBinaries(t, dir)
	o := Options{
		// Stale is 2.5 heartbeats (5 s): room for a loaded machine. The hold
		// passes 2 x stale after the connects, when nbio's stray read
		// deadline used to cut a few (clearReadDeadline in gateway).
		N: 4200, PerWorker: 1500, Runs: 1, Idle: 4 * time.Second, Hold: 12 * time.Second, Interval: 2 * time.Second,
		Debounce: 300 * time.Millisecond, Concurrency: 50, Subs: 1600, Rounds: 2, LookupRate: 20,
		Bin: dir, Self: filepath.Join(dir, "bench"), RedisServer: redis, Dir: dir,
		Webhook: true, Systems: []string{"presence", "redis-ttl"},
	}
	if centrifugo != "" {
		o.Systems, o.Centrifugo = append(o.Systems, "centrifugo"), centrifugo
	} else {
		t.Log("no Centrifugo installed (make centrifugo): presence against the Redis-TTL peer only")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	results, err := Run(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	if len(results) != len(o.Systems) {
		t.Fatalf("%d results, want one per system", len(results))
	}
	for _, r := range results {
		checkResult(t, o, r)
		// Every device's user came online once (each its own user): each
		// is at least one event at the receiver by the end.
		if r.System == "presence" && r.WebhookEvents < int64(o.N) {
			t.Errorf("the webhook receiver got %d events, want at least one per user (%d): %s", r.WebhookEvents, o.N, r.Webhooks)
		}
	}
	var b bytes.Buffer
	Report(&b, o, Machine(), results)
	t.Log("\n" + b.String())
	o.Defaults()
	for _, r := range rows(o) {
		if !strings.Contains(b.String(), "| "+r.name+" |") {
			t.Errorf("the table has no row %q", r.name)
		}
	}
	if centrifugo != "" && !strings.Contains(b.String(), "| presence vs redis-ttl | presence vs centrifugo |") {
		t.Error("the table has no ratio column against each peer")
	}
}

// A run stopped in its idle window (bench run's SIGINT or SIGTERM end its
// context) returns the context's error instead of going on to the fan-out
// and the next run: without the checks it finished both and returned no
// error. With --profile naming a directory that does not exist yet, Run
// makes it (its workers failed on their first profile before).
func TestRunStopsWhenItsContextEnds(t *testing.T) {
	dir := t.TempDir()
	buildBinaries(t, dir)
	o := Options{
		N: 200, PerWorker: 200, Runs: 2, Idle: 10 * time.Minute, Interval: 2 * time.Second,
		Debounce: 300 * time.Millisecond, Concurrency: 20, Subs: 100, Rounds: 1, LookupRate: 5,
		Bin: dir, Self: filepath.Join(dir, "bench"), Dir: dir, Systems: []string{"presence"},
		Profile: filepath.Join(dir, "profiles", "run"),
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	o.Progress = cancelAt{"presence idle", cancel}
	results, err := Run(ctx, o)
	if !errors.Is(err, context.Canceled) || len(results) != 0 {
		t.Fatalf("Run stopped in its idle window: %d results, err %v; want none and %v", len(results), err, context.Canceled)
	}
	if ps, _ := filepath.Glob(filepath.Join(o.Profile, "worker-*.pprof")); len(ps) == 0 {
		t.Fatalf("no worker profile in %s", o.Profile)
	}
}

// A system whose binary is missing stops Run before any run starts, with
// the binary and what installs it; no run's directory is made.
func TestRunNamesAMissingBinaryFirst(t *testing.T) {
	bin := t.TempDir()
	presenced := filepath.Join(bin, "presenced")
	if err := os.WriteFile(presenced, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		o       Options
		missing string
	}{
		{"no presenced", Options{Bin: t.TempDir(), Systems: []string{"presence"}}, "presence needs "},
		{"no redis-server", Options{Bin: bin, RedisServer: filepath.Join(bin, "redis-server"), Systems: []string{"presence", "redis-ttl"}}, "redis-ttl needs " + filepath.Join(bin, "redis-server")},
		{"no centrifugo", Options{Bin: bin, Centrifugo: filepath.Join(bin, "centrifugo"), Systems: []string{"presence", "centrifugo"}}, "centrifugo needs " + filepath.Join(bin, "centrifugo")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.o.Dir = t.TempDir()
			results, err := Run(context.Background(), tc.o)
			if err == nil || !strings.Contains(err.Error(), tc.missing) || !strings.Contains(err.Error(), "make ") || len(results) != 0 {
				t.Fatalf("Run = %d results, %v; want none and an error with %q and what installs it", len(results), err, tc.missing)
			}
			if runs, _ := os.ReadDir(tc.o.Dir); len(runs) != 0 {
				t.Errorf("%d run directories made before the error", len(runs))
			}
		})
	}
}

// cancelAt is a progress writer that calls cancel when the progress says
// what.
type cancelAt struct {
	what   string
	cancel context.CancelFunc
}

func (c cancelAt) Write(b []byte) (int, error) {
	if bytes.Contains(b, []byte(c.what)) {
		c.cancel()
	}
	return len(b), nil
}

func checkResult(t *testing.T, o Options, r RunResult) {
	t.Helper()
	switch {
	case r.ConnectRate <= 0 || r.RSSConnect <= 0 || r.Heap <= 0 || r.ConnectCPU <= 0 || r.LoadCPU <= 0:
		t.Errorf("%s: connect rate %v, RSS %v, heap %v, CPU %v (load %v) per device: want all > 0", r.System, r.ConnectRate, r.RSSConnect, r.Heap, r.ConnectCPU, r.LoadCPU)
	case r.Beats < int64(o.N) || r.CPUPerBeat <= 0:
		t.Errorf("%s: %d heartbeats sent in %v, CPU %v each: want at least one per device", r.System, r.Beats, o.Idle, r.CPUPerBeat)
	case r.Lookups == 0 || r.LookupErrors > 0:
		t.Errorf("%s: %d lookups, %d failed", r.System, r.Lookups, r.LookupErrors)
	case len(r.Fanout) != r.FanoutExpected || r.FanoutExpected != o.Subs*max(o.Devices, 1)*o.Rounds:
		t.Errorf("%s: %d offline events reached subscribers, want %d", r.System, len(r.Fanout), o.Subs*max(o.Devices, 1)*o.Rounds)
	case r.Unexpected != 0:
		t.Errorf("%s: %d connections ended nobody asked for (codes %s): %s", r.System, r.Unexpected, r.Codes, r.Errors)
	case r.LiveHeap <= 0 || r.LiveHeap > r.Heap:
		t.Errorf("%s: live heap %v per device, want > 0 and below the heap in use (%v)", r.System, r.LiveHeap, r.Heap)
	case r.BeatBytes < 6 || r.BeatBytes > 256 || r.AnswerBytes <= 0:
		// a masked frame's header alone is 6 bytes
		t.Errorf("%s: %v bytes per heartbeat written, %v read: want a frame's, and an answer", r.System, r.BeatBytes, r.AnswerBytes)
	case r.System == "presence" && !(r.BeatP99 > 0 && r.BeatP99 < 1):
		t.Errorf("presence: heartbeat processing p99 %v s, want measured", r.BeatP99)
	case r.System != "presence" && !math.IsNaN(r.BeatP99):
		t.Errorf("%s: heartbeat processing p99 %v, want not measured (NaN)", r.System, r.BeatP99)
	case slices.ContainsFunc([]float64{r.FanoutCost.CPU, r.FanoutCost.LoadCPU, r.FanoutCost.Wait, r.FanoutCost.LoadWait}, math.IsNaN):
		// the idle share may be NaN: a small fan-out can end between two reads
		t.Errorf("%s: the fan-out's CPU and waits %+v, want each measured", r.System, r.FanoutCost)
	}
	if r.System == "presence" && r.Held < o.Hold {
		t.Errorf("presence held its devices %v, want %v", r.Held, o.Hold)
	}
}

// TestBenchClusterSmoke is `make bench-cluster` in small: three presenced
// nodes (three peer processes on one Redis), 300 users with two devices
// each on two nodes, every device subscribed to the user that goes
// offline: each must hear it.
func TestBenchClusterSmoke(t *testing.T) {
	redis, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatal("no redis-server: `make tools` installs Debian's redis-server")
	}
	dir := t.TempDir()
	buildBinaries(t, dir)
	o := Options{
		N: 600, Nodes: 3, Devices: 2, Renew: 2 * time.Second, PerWorker: 200, Runs: 1, Idle: 2 * time.Second, Interval: 2 * time.Second,
		Debounce: 300 * time.Millisecond, Concurrency: 30, Subs: 300, Rounds: 1, LookupRate: 20,
		Bin: dir, Self: filepath.Join(dir, "bench"), RedisServer: redis, Dir: dir,
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	results, err := Run(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range results {
		checkResult(t, o, r)
	}
	var b bytes.Buffer
	Report(&b, o, Machine(), results)
	t.Log("\n" + b.String())
	if !strings.Contains(b.String(), "| one offline to 600 subscribers (300 users x 2 devices) over 3 nodes, p99 |") {
		t.Error("the table has no row for the fan-out over 3 nodes")
	}
}

// TestBenchStoreSmoke is `make bench-store` in small, on SQLite and
// PostgreSQL: 600 devices connect and drop at once; the node counts every
// floor and last seen written, none failed, and every one is in the
// database afterwards.
func TestBenchStoreSmoke(t *testing.T) {
	dir := t.TempDir()
	buildBinaries(t, dir)
	so := StoreOptions{N: 600, Runs: 1, PerWorker: 300, Concurrency: 30, Interval: 2 * time.Second, Steady: time.Second, Tail: time.Second,
		Stores: []string{"sqlite", "postgres"}, Bin: dir, Self: filepath.Join(dir, "bench"), Dir: dir}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	results, err := RunStore(ctx, so)
	if err != nil {
		t.Fatal(err)
	}
	if len(results) != 2 {
		t.Fatalf("%d results, want one per store", len(results))
	}
	for _, r := range results {
		if r.Floors != 600 || r.LastSeens != 600 || r.Lost != 0 || r.FailedOrRefused != 0 || r.Unexpected != 0 {
			t.Errorf("%s: %s, %.0f failed or refused, %d cut: want 600 of each written, none lost, failed or cut", r.Store, r.brief(so.N), r.FailedOrRefused, r.Unexpected)
		}
		if r.Commits < 1 || r.SteadyRSS <= 0 || r.PeakRSS <= 0 {
			t.Errorf("%s: %v commits, RSS %v steady, %v peak: want figures", r.Store, r.Commits, r.SteadyRSS, r.PeakRSS)
		}
	}
	var b bytes.Buffer
	ReportStore(&b, so, Machine(), results)
	t.Log("\n" + b.String())
}

// TestLostWritesCounted: the database check finds a device whose last
// seen never reached the store.
func TestLostWritesCounted(t *testing.T) {
	path := filepath.Join(t.TempDir(), "presence.db")
	s, err := sqlite.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i, u := range users(0, 3) {
		if err := s.RaiseFloor(ctx, u, "d", 7); err != nil {
			t.Fatal(err)
		}
		if i != 1 {
			if err := s.SetLastSeen(ctx, u, time.Now()); err != nil {
				t.Fatal(err)
			}
		}
	}
	s.Close()
	if lost, err := lostWrites(ctx, "sqlite:"+path, 3); lost != 1 || err != nil {
		t.Fatalf("lostWrites = %d, %v; want 1 (bench000001 has no last seen)", lost, err)
	}
}

// TestStormSmoke is `make bench-storm` in small: 1,200 devices from two
// load processes, each user subscribed to 2 contacts in real time and 6
// batched, half of them leaving for 1.5 s; once tiered, once realtime
// only, then a tiered wave on a node whose --degrade-at is so tiny that
// the wave degrades it, and a tiered wave of 600 devices on three nodes.
// Every device must end holding every contact as the nodes' truth says,
// no version going back on the wire, the realtime subscribers must have
// seen the offlines, merging must have sent fewer frames than realtime
// alone, and the degraded waves must have been degraded, pulled and
// restored.
func TestStormSmoke(t *testing.T) {
	dir := t.TempDir()
	buildBinaries(t, dir)
	o := StormOptions{Options: Options{
		N: 1200, PerWorker: 600, Runs: 1, Interval: 2 * time.Second, Debounce: 300 * time.Millisecond, Concurrency: 50,
		Bin: dir, Self: filepath.Join(dir, "bench"), Dir: dir, NodeArgs: []string{"--batch-window", "500ms"},
	}, R: 2, B: 6, Frac: 0.5, Away: 1500 * time.Millisecond}
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	rs, err := RunStorm(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	StormReport(&b, o, Machine(), rs)
	t.Log("\n" + b.String())
	if len(rs) != 2 || !rs[0].Tiered || rs[1].Tiered {
		t.Fatalf("%d results, want a tiered and a realtime-only wave", len(rs))
	}
	for _, r := range rs {
		checkStorm(t, "", r)
		if len(r.RealtimeOffline) == 0 || r.RSSPeak == 0 || r.RSSSteady == 0 {
			t.Errorf("tiered %v: no realtime offline seen or no RSS: %+v", r.Tiered, r)
		}
	}
	if rs[0].BatchedSettle == 0 || rs[0].Frames >= rs[1].Frames {
		t.Errorf("tiered: settle %v, %d frames against %d realtime only", rs[0].BatchedSettle, rs[0].Frames, rs[1].Frames)
	}
	if rs[1].FramesByKind[kindPresence] == 0 || rs[1].FramesByKind[kindSnapshot] == 0 || rs[0].FramesByKind[kindBatch] == 0 {
		t.Errorf("frames by kind: tiered %v, realtime only %v: want presences and snapshots, and batches tiered", rs[0].FramesByKind, rs[1].FramesByKind)
	}

	o.Degrade = config.Degrade{At: 2 * time.Microsecond, Below: time.Microsecond, RestoreAfter: time.Second, Pull: time.Second}
	stormDegradedWave(ctx, t, o, "one node degraded")
	// A 2 s renew keeps the cluster's settle (renew / 2 and more, waited
	// before the contacts subscribe) short, as in TestBenchClusterSmoke.
	o.N, o.PerWorker, o.Nodes, o.Renew = 600, 200, 3, 2*time.Second
	stormDegradedWave(ctx, t, o, "three nodes degraded")
}

// stormDegradedWave runs one tiered wave whose node(s) degrade: devices
// must have been told to pull, pulled (query answers), been restored
// (restored and its snapshot), and end with the truth.
func stormDegradedWave(ctx context.Context, t *testing.T, o StormOptions, name string) {
	t.Helper()
	o.Defaults()
	dir, err := os.MkdirTemp(o.Dir, "storm-")
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	r, err := stormOnce(ctx, o, true, dir)
	if err != nil {
		t.Fatalf("%s: %v (logs in %s)", name, err, dir)
	}
	t.Logf("%s: the wave took %v", name, time.Since(start).Round(time.Second))
	var b bytes.Buffer
	StormReport(&b, o, Machine(), []StormResult{r})
	t.Log("\n" + b.String())
	checkStorm(t, name, r)
	k := r.FramesByKind
	if r.Degraded == 0 || k[kindDegraded] == 0 || k[kindQuery] == 0 || k[kindRestored] == 0 || k[kindRestSnap] == 0 {
		t.Errorf("%s: %v connections degraded, frames %v: want degraded, query answers, restored and its snapshot", name, r.Degraded, k)
	}
}

// checkStorm: every device held every contact as the truth, push was
// restored on every node, and no version went back on the wire.
func checkStorm(t *testing.T, name string, r StormResult) {
	t.Helper()
	if r.Wrong != 0 || r.Converged == 0 || r.DegradedAtEnd != 0 || r.Regressions != 0 || r.Unexpected != 0 {
		t.Errorf("%s tiered %v: %d contacts held otherwise than the truth (%d not held), converged %v, %v nodes degraded at the end, %d versions back, %d connections cut (%s: %s)",
			name, r.Tiered, r.Wrong, r.Missing, r.Converged, r.DegradedAtEnd, r.Regressions, r.Unexpected, r.Codes, r.Errors)
	}
}

// A refused handshake is retried after at least the server's Retry-After
// until the device's patience runs out; another failure five times in all.
func TestDialRetry(t *testing.T) {
	far, near := time.Now().Add(time.Hour), time.Now().Add(500*time.Millisecond)
	refused := &client.HandshakeError{Status: http.StatusTooManyRequests, RetryAfter: time.Second}
	if wait, again := dialRetry(refused, 0, far); !again || wait < time.Second {
		t.Errorf("429 Retry-After 1s, patience left: %v %v, want again after >= 1s", wait, again)
	}
	if _, again := dialRetry(&client.HandshakeError{Status: http.StatusServiceUnavailable, RetryAfter: time.Second}, 30, near); again {
		t.Error("503 past the patience: want no retry")
	}
	if _, again := dialRetry(refused, 30, far); !again {
		t.Error("429 after 30 tries with patience left: want another")
	}
	other := errors.New("connection refused")
	for try, want := range []bool{true, true, true, true, false} {
		if _, again := dialRetry(other, try, far); again != want {
			t.Errorf("try %d of another failure: again %v, want %v", try, again, want)
		}
	}
	if _, again := dialRetry(nil, 0, far); again {
		t.Error("a success retried")
	}
}

// A load device asks for acks as an SDK's idle device does, every other
// heartbeat, though its beats come a full interval apart and a timer's
// slack later, whatever the round trip up to a good part of an interval.
func TestBenchBeatsAskEveryOther(t *testing.T) {
	const interval = 5 * time.Second
	for _, c := range []struct{ slack, rtt time.Duration }{
		{0, 0}, {20 * time.Millisecond, 0}, {300 * time.Millisecond, time.Millisecond}, {0, 2 * time.Second},
	} {
		asks := benchAckPolicy(interval)
		var heard, at time.Duration // the last frame heard, the beat; from the hello
		var got []byte
		for range 12 {
			at += interval + c.slack
			if asks.Ask(at - heard) {
				got, heard = append(got, 'a'), at+c.rtt
			} else {
				got = append(got, '-')
			}
		}
		if string(got) != "a-a-a-a-a-a-" {
			t.Errorf("slack %v, round trip %v: asked %q, want every other", c.slack, c.rtt, got)
		}
	}
}
