package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
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

// A fenced node's new incarnation whose address is gone (its container
// disconnected from its network) waits for it with a growing back-off, one
// line a try, instead of exiting: a supervisor's restart would start it
// afresh, without what the fenced one knew. An address of this machine
// passes at once. (Virtual time: the tries do not wait.)
func TestAwaitAddress(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logs bytes.Buffer
		log := slog.New(slog.NewTextHandler(&logs, nil))
		if err := awaitAddress(t.Context(), "127.0.0.1", addressWait, log); err != nil || logs.Len() > 0 {
			t.Fatalf("loopback: %v, logged %q", err, logs.String())
		}
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		start := time.Now()
		err := awaitAddress(ctx, "192.0.2.1", 4*time.Second, log) // TEST-NET-1: on no machine
		if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) != 10*time.Second {
			t.Fatalf("an address that never comes: %v after %v, want the deadline after 10s", err, time.Since(start))
		}
		var waits []string
		for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
			_, next, _ := strings.Cut(line, "next_in=")
			next, _, _ = strings.Cut(next, " ")
			waits = append(waits, next)
		}
		if want := []string{"1s", "2s", "4s", "4s"}; !slices.Equal(waits, want) {
			t.Fatalf("waits %v, want %v (doubling up to the most; tries at 0, 1, 3, 7 s)", waits, want)
		}
	})
}

// TestRejoinArgvDoesNotGrow: a node fenced again and again re-executes with
// one --node-id and one --join, whatever form the caller's took, and keeps
// its other flags and anything after "--".
func TestRejoinArgvDoesNotGrow(t *testing.T) {
	args := []string{"--gossip", "127.0.0.1:7946", "-join=a:1", "--node-id", "n1", "--join", "b:2", "--idle=4s", "--", "--join", "x"}
	seeds := []string{"a:1", "b:2", "c:3"}
	want := []string{"presenced", "--gossip", "127.0.0.1:7946", "--idle=4s", "--node-id", "n1", "--join", "a:1,b:2,c:3", "--", "--join", "x"}
	argv := rejoinArgv("presenced", args, "n1", seeds)
	for range 3 { // fenced again: the last incarnation's arguments
		if !slices.Equal(argv, want) {
			t.Fatalf("argv = %q\nwant   %q", argv, want)
		}
		argv = rejoinArgv("presenced", argv[1:], "n1", seeds)
	}
}
