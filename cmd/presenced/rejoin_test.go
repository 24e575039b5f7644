package main

import (
	"io"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/presence-im/presence/cluster"
)

// The fenced node's admin API: serve-alone needs a configured token (403
// without one, 401 with a wrong one, and the node stays fenced), then
// releases the rejoin loop once.
func TestFencedAdminServeAlone(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, tc := range []struct {
		name, token, sent string
		code              int
	}{
		{"no token configured", "", "", http.StatusForbidden},
		{"wrong token", "tok", "nope", http.StatusUnauthorized},
		{"the token", "tok", "tok", http.StatusAccepted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr := freePort(t)
			r := &cluster.Rejoin{Base: []cluster.Voter{{ID: "n1", Up: 1}}, Fenced: time.Now()}
			f, err := startFencedAdmin(addr, tc.token, r, log)
			if err != nil {
				t.Fatal(err)
			}
			defer f.stop()
			req, _ := http.NewRequest("POST", "http://"+addr+"/api/fence/serve-alone", nil)
			if tc.sent != "" {
				req.Header.Set("Authorization", "Bearer "+tc.sent)
			}
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			if res.StatusCode != tc.code {
				t.Fatalf("status %d, want %d", res.StatusCode, tc.code)
			}
			select {
			case <-r.Alone:
				if tc.code != http.StatusAccepted {
					t.Fatal("released without the token")
				}
			default:
				if tc.code == http.StatusAccepted {
					t.Fatal("not released")
				}
			}
			res, err = http.Get("http://" + addr + "/readyz")
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			if res.StatusCode != http.StatusServiceUnavailable {
				t.Fatalf("readyz while fenced: %d, want 503", res.StatusCode)
			}
		})
	}
}
