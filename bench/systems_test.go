package bench

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// The share before the hand-over is the close-mode detection's mean past
// the view's deliberate wait, from every node's /metrics; none measured,
// it says nothing.
func TestBeforeHandOver(t *testing.T) {
	count := 3
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer tok" {
			http.Error(w, "no token", http.StatusUnauthorized)
			return
		}
		fmt.Fprintf(w, "presence_offline_detection_seconds_sum{mode=\"close\"} %g\n", 0.2*float64(count))
		fmt.Fprintf(w, "presence_offline_detection_seconds_count{mode=\"close\"} %d\n", count)
		fmt.Fprintf(w, "presence_offline_detection_seconds_count{mode=\"half_open\"} 9\n")
	}))
	defer srv.Close()
	s := &presenceSys{token: "tok", debounce: 200 * time.Millisecond, admin: []string{srv.Listener.Addr().String()}}
	// 200 ms from departure to offline, of it 160 ms the view's wait (the
	// debounce less its 40 ms delivery budget): 40 ms before the hand-over.
	if got := s.beforeHandOver(); !strings.Contains(got, "3 offlines, mean 40.0 ms") {
		t.Fatalf("beforeHandOver() = %q, want 3 offlines, mean 40.0 ms", got)
	}
	count = 0
	if got := s.beforeHandOver(); got != "" {
		t.Fatalf("with no close measured: %q, want nothing", got)
	}
}
