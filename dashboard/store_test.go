package dashboard_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/presence-im/presence/actors"
	"github.com/presence-im/presence/admin"
	"github.com/presence-im/presence/cluster"
	"github.com/presence-im/presence/config"
	"github.com/presence-im/presence/store"
	"github.com/prometheus/client_golang/prometheus"
)

// downHistory fails every floor read while down, as a stopped store.
type downHistory struct {
	*store.MemoryHistory
	down atomic.Bool
}

func (h *downHistory) Floor(ctx context.Context, user, device string) (uint64, error) {
	if h.down.Load() {
		return 0, errors.New("connection refused")
	}
	return h.MemoryHistory.Floor(ctx, user, device)
}

// A node whose store fails is listed in /api/cluster's store_failing with
// the operations failing, and its row on the page says "store failing";
// once a call works again, neither does.
func TestDashboardShowsTheStoreFailing(t *testing.T) {
	reg := prometheus.NewRegistry()
	down := &downHistory{MemoryHistory: store.NewMemoryHistory()}
	m := store.NewStoreMetrics(nil)
	m.Health = store.NewHealth(nil, nil)
	history := m.InstrumentHistory(down)
	n, err := actors.Start(actors.Deps{NodeID: "n1", Timing: config.Fast(), Seed: 1, Policies: store.NewMemoryPolicies(),
		History: history, Metrics: actors.NewMetrics(reg)})
	if err != nil {
		t.Fatal(err)
	}
	api := &admin.Server{Node: n, Members: cluster.Single{Member: cluster.Member{ID: "n1", State: cluster.Alive, Since: time.Now()}},
		Timing: config.Fast(), Policies: store.NewMemoryPolicies(), Gatherer: reg}
	srv := httptest.NewServer(api.Handler())
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
		n.Stop()
		time.Sleep(1100 * time.Millisecond) // proto.actor's dead-letter throttle goroutine
	})
	failing := func() map[string][]string {
		t.Helper()
		res, err := http.Get(srv.URL + "/api/cluster")
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var c admin.Cluster
		if err := json.NewDecoder(res.Body).Decode(&c); err != nil {
			t.Fatal(err)
		}
		return c.StoreFailing
	}
	ctx := browse(t)
	run := func(a chromedp.Action[chromedp.Void]) {
		t.Helper()
		if _, err := chromedp.Run(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	marks := func() int {
		t.Helper()
		n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("#members .store-failing").length`))
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	run(chromedp.Navigate(srv.URL + "/"))
	run(chromedp.WaitVisible(`#members tbody tr[data-member="n1"]`))
	if f, n := failing(), marks(); len(f) != 0 || n != 0 {
		t.Fatalf("store failing %v, %d marks on the page before any call failed", f, n)
	}

	down.down.Store(true)
	if _, err := history.Floor(context.Background(), "alice", "phone"); err == nil {
		t.Fatal("a floor read with the store down")
	}
	if f := failing(); !slices.Equal(f["n1"], []string{"floor"}) {
		t.Fatalf("/api/cluster store_failing = %v, want n1: [floor]", f)
	}
	run(chromedp.WaitVisible(`#members tbody tr[data-member="n1"] .store-failing`))
	if s, err := chromedp.Run(ctx, chromedp.Text(`#members tbody tr[data-member="n1"] .store-failing`)); err != nil || !strings.HasPrefix(s, "store failing: floor") {
		t.Fatalf("n1's row says %q (%v), want store failing: floor", s, err)
	}

	down.down.Store(false)
	if _, err := history.Floor(context.Background(), "alice", "phone"); err != nil {
		t.Fatal(err)
	}
	if f := failing(); len(f) != 0 {
		t.Fatalf("/api/cluster store_failing = %v once the store answers", f)
	}
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`document.querySelectorAll("#members .store-failing").length === 0`)); err != nil {
		t.Fatalf("the page still says the store fails: %v", err)
	}
	http.DefaultClient.CloseIdleConnections()
}
