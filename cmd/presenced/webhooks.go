package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/presence-im/presence/actors"
	"github.com/presence-im/presence/config"
	"github.com/presence-im/presence/core"
	"github.com/presence-im/presence/messages"
	"github.com/presence-im/presence/store"
	"github.com/presence-im/presence/store/postgres"
	"github.com/presence-im/presence/store/sqlite"
	"github.com/presence-im/presence/webhook"
	"github.com/prometheus/client_golang/prometheus"
)

// nodeRef is the node, once started: the webhooks start before it (its
// views need them) and ask it who owns a user's view and who is alive.
type nodeRef struct{ atomic.Pointer[actors.Node] }

// hooks are the node's webhooks (h nil without an endpoint).
type hooks struct {
	h    *webhook.Hooks
	ref  nodeRef
	stop func()
}

// sink is what the views tell their changes (nil: none).
func (w *hooks) sink() actors.ChangeSink {
	if w.h == nil {
		return nil
	}
	return w.h
}

// api answers GET /api/webhooks (nil: none).
func (w *hooks) api() interface {
	States(ctx context.Context) []webhook.State
} {
	if w.h == nil {
		return nil
	}
	return w.h
}

// startWebhooks starts the webhooks of --webhook-url, their rows in the
// --policy-dsn store on a handle of their own.
func startWebhooks(cfg config.Config, reg prometheus.Registerer, log *slog.Logger) (*hooks, error) {
	w := &hooks{stop: func() {}}
	if len(cfg.WebhookURLs) == 0 {
		return w, nil
	}
	st, closeStore, err := openHooks(cfg.PolicyDSN)
	if err != nil {
		return nil, fmt.Errorf("webhooks: %w", err)
	}
	var eps []webhook.Endpoint
	for _, u := range cfg.WebhookURLs {
		eps = append(eps, webhook.Endpoint{URL: u, Secret: []byte(cfg.WebhookSecret)})
	}
	w.h, err = webhook.Start(webhook.Config{
		Endpoints: eps, Node: cfg.NodeID, Store: st, Log: log, Registerer: reg,
		Owns: func(user string) bool {
			n := w.ref.Load()
			return n != nil && n.OwnsView(user)
		},
		Alive: func() []string { return alive(w.ref.Load(), cfg.NodeID) },
		Query: func(ctx context.Context, user string, floor uint64) (*messages.ViewState, error) {
			n := w.ref.Load()
			if n == nil {
				return nil, errNotStarted
			}
			return n.QueryAbove(ctx, user, floor)
		},
		Limits: webhook.Limits{BackoffMax: cfg.WebhookRetryMax, MaxBacklog: cfg.WebhookBacklog},
		Rand:   core.Rand(cfg.Seed, "webhooks"),
	})
	if err != nil {
		closeStore()
		return nil, err
	}
	log.Info("webhooks", "endpoints", len(eps))
	w.stop = func() { w.h.Stop(); closeStore() }
	return w, nil
}

var errNotStarted = errors.New("webhooks: the node has not started")

// alive are the ids of the members alive as this node sees them (itself
// alone before it started).
func alive(n *actors.Node, self string) []string {
	if n == nil {
		return []string{self}
	}
	return n.AliveMembers()
}

// openHooks opens the webhook rows of a store DSN.
func openHooks(dsn string) (store.HookStore, func(), error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	switch {
	case dsn == "memory":
		return store.NewMemoryHooks(), func() {}, nil
	case strings.HasPrefix(dsn, "postgres"):
		s, err := postgres.Open(ctx, dsn)
		if err != nil {
			return nil, nil, err
		}
		h, err := s.Hooks(ctx)
		if err != nil {
			s.Close()
			return nil, nil, err
		}
		return h, s.Close, nil
	}
	path := strings.TrimPrefix(dsn, "sqlite:")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, nil, err
	}
	s, err := sqlite.Open(path)
	if err != nil {
		return nil, nil, err
	}
	h, err := s.Hooks(ctx)
	if err != nil {
		s.Close()
		return nil, nil, err
	}
	return h, func() { s.Close() }, nil
}
