package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/presence-im/presence/core"
	"github.com/presence-im/presence/messages"
)

// ErrConnectionLost fails a Query whose connection ended before its
// answer: ask again (the session reconnects by itself).
var ErrConnectionLost = errors.New("client: the connection ended before the answer")

// ErrNotConnected fails a Query asked while the session has no
// connection.
var ErrNotConnected = errors.New("client: not connected")

// ServerError is an error frame the node answered a request with: Code is
// its HTTP-like code (400 bad request, 429 slow down), RetryAfter how long
// to wait before asking again (429).
type ServerError struct {
	Code       uint32
	Message    string
	RetryAfter time.Duration
}

func (e *ServerError) Error() string {
	return fmt.Sprintf("client: the node refused (%d): %s", e.Code, e.Message)
}

func serverError(e *messages.Error) *ServerError {
	return &ServerError{Code: e.GetCode(), Message: e.GetMessage(), RetryAfter: time.Duration(e.GetRetryAfterMs()) * time.Millisecond}
}

type queryAnswer struct {
	presences []*messages.Presence
	err       error
}

// Query asks for the presence of targets once, as a group page does when
// it opens: the answer holds one presence per target this user may see (a
// hidden one is absent, never offline), nothing is subscribed and the
// session's State is not changed. The node bounds queries per second and
// in flight (429: a *ServerError with RetryAfter) and targets per query
// (1000). A query whose frame would be over messages.MaxMessage bytes (1000
// ids of 128 characters) is refused with ErrTooLarge, nothing sent.
func (s *Session) Query(ctx context.Context, targets ...string) ([]*messages.Presence, error) {
	return s.query(ctx, false, targets)
}

// query is Query; a pull's (pull true) answer is also taken as changes by
// the reader (Session.pulls). The frame is written whatever ctx does:
// a write whose context ends closes the socket (coder/websocket), and ctx
// only bounds the wait for the answer.
func (s *Session) query(ctx context.Context, pull bool, targets []string) ([]*messages.Presence, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	c := s.conn
	if c == nil {
		s.mu.Unlock()
		return nil, ErrNotConnected
	}
	s.reqs++
	id := fmt.Sprintf("q%d", s.reqs)
	ch := make(chan queryAnswer, 1)
	if s.queries == nil {
		s.queries = map[string]chan queryAnswer{}
	}
	s.queries[id] = ch
	if pull {
		if s.pulls == nil {
			s.pulls = map[string]bool{}
		}
		s.pulls[id] = true
	}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.queries, id)
		delete(s.pulls, id)
		s.mu.Unlock()
	}()
	if err := c.Query(context.WithoutCancel(ctx), id, targets...); err != nil {
		return nil, err
	}
	select {
	case a := <-ch:
		return a.presences, a.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// answerQuery hands a snapshot or an error frame to the Query waiting for
// its request id; false: none waits (a subscribe's).
func (s *Session) answerQuery(id string, a queryAnswer) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	ch, ok := s.queries[id]
	if !ok {
		return false
	}
	delete(s.queries, id)
	ch <- a
	return true
}

// failQueriesLocked fails every Query waiting; s.mu held.
func (s *Session) failQueriesLocked(err error) {
	for id, ch := range s.queries {
		delete(s.queries, id)
		ch <- queryAnswer{err: err}
	}
}

// chunkBudget is what a subscribe or query frame's targets may take: the
// message limit less room for the rest of the frame (request id, tier,
// field names).
const chunkBudget = messages.MaxMessage - 256

// chunk splits targets into requests of at most core.MaxTargets whose
// frames fit in a message, sized as JSON (the larger encoding): each
// target its quoted string, a comma and a space (protojson adds one after
// separators in some builds, at random, so that nobody relies on its
// output's form).
func chunk(targets []string) [][]string {
	var out [][]string
	var cur []string
	size := 0
	for _, t := range targets {
		q, _ := json.Marshal(t)
		if len(cur) > 0 && (len(cur) == core.MaxTargets || size+len(q)+2 > chunkBudget) {
			out = append(out, cur)
			cur, size = nil, 0
		}
		cur, size = append(cur, t), size+len(q)+2
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out
}

// byTier groups the subscribed targets by tier, sorted; s.mu held.
func (s *Session) byTier() map[messages.Tier][]string {
	out := map[messages.Tier][]string{}
	for t, tier := range s.targets {
		out[tier] = append(out[tier], t)
	}
	for _, ts := range out {
		slices.Sort(ts)
	}
	return out
}

// subscribeAll subscribes every target again, a request per tier and per
// core.MaxTargets targets or message (chunk).
func (s *Session) subscribeAll(ctx context.Context, c *Conn, byTier map[messages.Tier][]string) {
	for _, tier := range []messages.Tier{messages.Tier_realtime, messages.Tier_batched} {
		s.subscribe(ctx, c, tier, byTier[tier])
	}
}

// subscribe sends targets in tier on c, a request per chunk.
func (s *Session) subscribe(ctx context.Context, c *Conn, tier messages.Tier, targets []string) {
	for _, ts := range chunk(targets) {
		s.mu.Lock()
		id := s.request(ts)
		s.mu.Unlock()
		_ = c.SubscribeTier(ctx, id, tier, ts...)
	}
}
