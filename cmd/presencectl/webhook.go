package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/presence-im/presence/client"
	"github.com/presence-im/presence/config"
	"github.com/presence-im/presence/webhook"
)

// listener is presencectl webhook-listen's receiver: it checks each
// delivery's signature, prints its events and counts what a backend
// would: the highest version per user, and events not newer (duplicates).
type listener struct {
	secret []byte
	window time.Duration
	out    io.Writer

	mu     sync.Mutex
	latest map[string]uint64
	dups   int
}

func (l *listener) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 16<<20))
	if err == nil {
		err = client.VerifyWebhook(l.secret, r.Header.Get(webhook.SignatureHeader), body, time.Now(), l.window)
	}
	if err != nil {
		fmt.Fprintf(l.out, "refused %s: %v\n", r.Header.Get(webhook.DeliveryHeader), err)
		http.Error(w, err.Error(), http.StatusUnauthorized)
		return
	}
	var b struct{ Events []webhook.Event }
	if err := json.Unmarshal(body, &b); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(l.out, "delivery %s: %d events\n", r.Header.Get(webhook.DeliveryHeader), len(b.Events))
	for _, ev := range b.Events {
		mark := ""
		if ev.Version <= l.latest[ev.User] {
			l.dups++
			mark = " (not newer: a duplicate)"
		} else {
			l.latest[ev.User] = ev.Version
		}
		fmt.Fprintf(l.out, "  %s %s v%d%s%s%s\n", ev.User, ev.Status, ev.Version, showOf(ev), devicesOf(ev), mark)
	}
}

func showOf(ev webhook.Event) string {
	s := ""
	if ev.Show != "" {
		s += " " + ev.Show
	}
	if ev.StatusText != "" {
		s += fmt.Sprintf(" %q", ev.StatusText)
	}
	if ev.Reason != "" {
		s += fmt.Sprintf(" (%s, %d ms)", ev.Reason, ev.LatencyMs)
	}
	return s
}

func devicesOf(ev webhook.Event) string {
	var ds []string
	for _, d := range ev.Devices {
		ds = append(ds, d.Device+":"+d.Platform+":"+d.Activity+"@"+d.Node)
	}
	if len(ds) == 0 {
		return ""
	}
	return " [" + strings.Join(ds, " ") + "]"
}

// webhookListenCmd runs a test receiver until interrupted.
func webhookListenCmd(args []string, out, errOut io.Writer) int {
	fs := flag.NewFlagSet("webhook-listen", flag.ContinueOnError)
	fs.SetOutput(errOut)
	addr := fs.String("listen", "127.0.0.1:7800", "address to receive the deliveries at (presenced --webhook-url http://ADDR/)")
	secret := fs.String("secret", os.Getenv(config.EnvName("webhook-secret")), "the nodes' --webhook-secret (default PRESENCE_WEBHOOK_SECRET)")
	window := fs.Duration("window", 5*time.Minute, "refuse a signature older or newer than this (a replay)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if len(*secret) < config.MinWebhookSecret {
		fmt.Fprintf(errOut, "presencectl webhook-listen: --secret has %d bytes: must be at least %d, the nodes' --webhook-secret\n", len(*secret), config.MinWebhookSecret)
		return 2
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintln(errOut, "presencectl webhook-listen:", err)
		return 1
	}
	fmt.Fprintf(out, "listening at http://%s/ (presenced --webhook-url http://%s/ --webhook-secret ...)\n", ln.Addr(), ln.Addr())
	srv := &http.Server{Handler: &listener{secret: []byte(*secret), window: *window, out: out, latest: map[string]uint64{}}, ReadHeaderTimeout: 5 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	go func() { <-ctx.Done(); _ = srv.Close() }()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintln(errOut, "presencectl webhook-listen:", err)
		return 1
	}
	return 0
}
