package admin

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/presence-im/presence/actors"
	"github.com/presence-im/presence/cluster"
	"github.com/presence-im/presence/config"
	"github.com/presence-im/presence/store"
	"github.com/prometheus/client_golang/prometheus"
)

// FuzzAdminBodies: any body on the write routes, for any user, is either
// taken (200, and read back as written) or refused with 400 and a JSON
// reason, leaving the stored policy as it was; never a 5xx, never a panic.
func FuzzAdminBodies(f *testing.F) {
	for _, s := range []string{
		`{"granularity":"exact","contacts":["bob"],"blocked":["eve"],"hidden_from":["mallory"]}`,
		`{"granularity":"coarse"}`, `{"granularity":"hidden","contacts":[]}`,
		`{"granularity":"exact"} {"granularity":"hidden"}`, `{"granularity":"exact","contacts":[".."]}`,
		`{"users":["alice","bob"]}`, `{"users":[]}`, `null`, `[]`, `{`, `"x"`, `{"granularity":null}`,
	} {
		f.Add(true, "alice", []byte(s))
		f.Add(false, "alice", []byte(s))
	}
	f.Add(true, "a..b", []byte(`{"granularity":"exact"}`))
	reg := prometheus.NewRegistry()
	policies := store.NewMemoryPolicies()
	n, err := actors.Start(actors.Deps{NodeID: "n1", Timing: config.Fast(), Seed: 1, Policies: policies, History: store.NewMemoryHistory(), Metrics: actors.NewMetrics(reg)})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() {
		n.Stop()
		time.Sleep(1100 * time.Millisecond) // proto.actor's dead-letter throttle goroutine
	})
	h := (&Server{Node: n, Members: cluster.Single{Member: cluster.Member{ID: "n1", State: cluster.Alive}}, Timing: config.Fast(),
		Policies: policies, Gatherer: reg, Timeout: 200 * time.Millisecond}).Handler()
	do := func(method, path string, body []byte) *httptest.ResponseRecorder {
		req := httptest.NewRequest(method, "/", bytes.NewReader(body))
		req.URL.Path, req.Host = path, "127.0.0.1"
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	f.Fuzz(func(t *testing.T, policy bool, user string, body []byte) {
		if !policy {
			rec := do("POST", "/api/presence/batch", body)
			if rec.Code != 200 && rec.Code != 400 {
				t.Fatalf("batch %q: %d %s", body, rec.Code, rec.Body)
			}
			return
		}
		path := "/api/users/" + url.PathEscape(user) + "/policy"
		before := do("GET", path, nil)
		rec := do("PUT", path, body)
		after := do("GET", path, nil)
		switch rec.Code {
		case 200:
			var put, got store.PolicyDoc
			if json.Unmarshal(rec.Body.Bytes(), &put) != nil || after.Code != 200 || json.Unmarshal(after.Body.Bytes(), &got) != nil {
				t.Fatalf("PUT %q taken (%s) but reads back %d %s", body, rec.Body, after.Code, after.Body)
			}
			if !bytes.Equal(rec.Body.Bytes(), after.Body.Bytes()) {
				t.Fatalf("PUT answered %s, GET reads %s", rec.Body, after.Body)
			}
		case 400, 404, 405, 301, 307: // bad body or id; a path the mux does not route
			var e struct{ Error string }
			if rec.Code == 400 && (json.Unmarshal(rec.Body.Bytes(), &e) != nil || e.Error == "") {
				t.Fatalf("400 without a JSON reason: %s", rec.Body)
			}
			if before.Code != after.Code || !bytes.Equal(before.Body.Bytes(), after.Body.Bytes()) {
				t.Fatalf("refused PUT %q changed the policy: %s -> %s", body, before.Body, after.Body)
			}
		default:
			if rec.Code >= http.StatusInternalServerError {
				t.Fatalf("PUT %q for %q: %d %s", body, user, rec.Code, rec.Body)
			}
		}
	})
}
