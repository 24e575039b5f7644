package admin

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/presence-im/presence/actors"
	"github.com/presence-im/presence/internal/poll"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// A batch naming more users than max-batch is 413 with a JSON error naming
// the limit, and looks up nobody; one at the limit answers every user. A
// lookup, alone or in a batch, of users nobody has seen leaves no view
// behind.
func TestBatchLimitAndLookupsLeaveNothing(t *testing.T) {
	f := newFixture(t, "", func(s *Server) { s.MaxBatch = 3 })
	names := func(n int) string {
		var us []string
		for i := range n {
			us = append(us, fmt.Sprintf("%q", fmt.Sprintf("u%d", i)))
		}
		return `{"users":[` + strings.Join(us, ",") + `]}`
	}
	activations := func() float64 { return testutil.ToFloat64(f.node.Metrics().Activations.WithLabelValues("view")) }
	code, body := f.do(t, "POST", "/api/presence/batch", names(4))
	var e struct{ Error string }
	if code != 413 || json.Unmarshal([]byte(body), &e) != nil || !strings.Contains(e.Error, "max-batch") || !strings.Contains(e.Error, "3") {
		t.Fatalf("batch of 4 = %d %s, want 413 with a JSON error naming max-batch 3", code, body)
	}
	if a := activations(); a != 0 {
		t.Fatalf("a refused batch activated %v views, want none", a)
	}
	if r := testutil.ToFloat64(f.node.Metrics().Refused.WithLabelValues(actors.LimitBatch)); r != 1 {
		t.Fatalf("batch refusals counted = %v, want 1", r)
	}
	code, body = f.do(t, "POST", "/api/presence/batch", names(3))
	var b struct{ Users []UserPresence }
	if code != 200 || json.Unmarshal([]byte(body), &b) != nil || len(b.Users) != 3 || b.Users[2].Status != "offline" {
		t.Fatalf("batch of 3 = %d %s, want three offline users", code, body)
	}
	if code, _ := f.do(t, "GET", "/api/presence/nobody", ""); code != 200 {
		t.Fatalf("lookup of an unknown user = %d, want 200 (offline)", code)
	}
	// Each view stops once it has answered; the stop is asynchronous.
	if a := activations(); a != 4 {
		t.Fatalf("view activations = %v, want 4 (one per user looked up)", a)
	}
	poll.Until(t, 2*time.Second, 10*time.Millisecond, "no view left by the lookups", func() bool { return f.node.Counts()["view"] == 0 })
}
