package client

import (
	"context"
	"errors"
	"maps"
	"slices"
	"time"

	"github.com/presence-im/presence/core"
	"github.com/presence-im/presence/messages"
)

// degraded starts pulling the targets the node stopped pushing: a query
// of them every retry_after_ms (in chunks of core.MaxTargets), each answer
// taken as changes (the version rule holds), until restored or the
// connection ends.
func (s *Session) degraded(ctx context.Context, d *messages.Degraded) {
	pace := max(time.Duration(d.GetRetryAfterMs())*time.Millisecond, 100*time.Millisecond)
	s.mu.Lock()
	if s.pulling == nil {
		s.pulling = map[string]bool{}
	}
	for _, t := range d.GetTargets() {
		s.pulling[t] = true
	}
	start := s.stopPull == nil
	var pctx context.Context
	if start {
		pctx, s.stopPull = context.WithCancel(ctx)
	}
	s.mu.Unlock()
	s.cfg.Log.Info("client: the node degraded batched targets to pull", "targets", len(d.GetTargets()), "every", pace)
	if start {
		s.pullers.Go(func() { s.pull(pctx, pace) })
	}
}

// restored stops pulling: the snapshot that follows (request id
// core.RestoredID) replaces the state of every degraded target.
func (s *Session) restored() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.asked == nil {
		s.asked = map[string][]string{}
	}
	s.asked[core.RestoredID] = slices.Sorted(maps.Keys(s.pulling))
	s.stopPullingLocked()
}

// stopPullingLocked ends the pull loop; an answer to one of its queries
// still on its way is no longer taken; s.mu held.
func (s *Session) stopPullingLocked() {
	if s.stopPull != nil {
		s.stopPull()
	}
	s.stopPull, s.pulling, s.pulls = nil, nil, nil
}

// pulled reports whether id is a pull's query still to be taken as
// changes, and forgets it.
func (s *Session) pulled(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	ok := s.pulls[id]
	delete(s.pulls, id)
	return ok
}

// pull queries the degraded targets every pace until ctx ends; a 429
// waits as long as the node says. The reader takes each answer as
// changes as it reads it (snapshot), so that one read before restored is
// taken before the restored snapshot and one read after is not.
func (s *Session) pull(ctx context.Context, pace time.Duration) {
	wait := pace
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = pace
		s.mu.Lock()
		targets := slices.Sorted(maps.Keys(s.pulling))
		s.mu.Unlock()
		for chunk := range slices.Chunk(targets, core.MaxTargets) {
			_, err := s.query(ctx, true, chunk)
			var se *ServerError
			if errors.As(err, &se) && se.RetryAfter > 0 {
				wait = se.RetryAfter
				break
			}
			if err != nil {
				s.cfg.Log.Debug("client: pulling degraded targets", "err", err)
				break
			}
		}
	}
}

// Pulling is the targets the node degraded to pull (its fan-out fell
// behind), in order: the session queries them itself until the node
// restores push. An app may show that their updates are slower.
func (s *Session) Pulling() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Sorted(maps.Keys(s.pulling))
}
