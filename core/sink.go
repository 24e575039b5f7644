package core

import (
	"errors"
	"fmt"

	"github.com/presence-im/presence/messages"
)

// MaxTargets bounds one subscribe request.
const MaxTargets = 1000

// ErrTooManySubscriptions is wrapped by a subscribe that would take a
// connection over its Sink.Max (error frame 413, docs/protocol.md).
var ErrTooManySubscriptions = errors.New("too many subscriptions")

// Sink is one connection's subscriptions, owned by its connection actor:
// the presence last sent to the device per target, and the subscribes
// whose snapshot is still being put together from the views' answers. It
// keeps the device's promise that a subscribe answers with one snapshot
// before any change of its targets, and that versions never go back: an
// event that overtakes the snapshot is held until the snapshot is out, and
// an event not newer than what the device has is dropped.
type Sink struct {
	// Max bounds the targets subscribed at once, over every request
	// (config.Limits.Subscriptions); 0: no bound.
	Max     int
	subs    map[string]*messages.Presence // target -> presence last sent (nil: none yet)
	pending map[string]*pendingSnap       // by request id
}

// pendingSnap collects a subscribe's SnapshotParts; events for its targets
// wait until the snapshot frame is out.
type pendingSnap struct {
	want map[string]bool
	got  []*messages.Presence
	held []*messages.Presence
}

// NewSink returns a sink with no subscription. Its maps come with its first
// subscribe: most connections never subscribe, and an empty map still
// costs its header (BENCHMARKS.md, heap per device).
func NewSink() *Sink {
	return &Sink{}
}

// Subscribe starts a subscribe request and returns the targets whose views
// must be asked for a snapshot part. A bad request (no target, too many, a
// request id already pending, an invalid id, more targets than Max allows
// beside those subscribed: ErrTooManySubscriptions) changes nothing and
// returns the error the device is told.
func (s *Sink) Subscribe(requestID string, targets []string) ([]string, error) {
	if len(targets) == 0 || len(targets) > MaxTargets {
		return nil, fmt.Errorf("subscribe: %d targets: must be 1 to %d", len(targets), MaxTargets)
	}
	if _, dup := s.pending[requestID]; dup {
		return nil, fmt.Errorf("subscribe: request_id %q is already pending", requestID)
	}
	ps := &pendingSnap{want: map[string]bool{}}
	added := 0
	for _, target := range targets {
		if err := ValidID("target", target); err != nil {
			return nil, fmt.Errorf("subscribe: %v", err)
		}
		if _, ok := s.subs[target]; !ok && !ps.want[target] {
			added++
		}
		ps.want[target] = true
	}
	if s.Max > 0 && len(s.subs)+added > s.Max {
		return nil, fmt.Errorf("subscribe: %w: %d subscribed and %d new, over the limit of %d per connection (max-subscriptions); unsubscribe first",
			ErrTooManySubscriptions, len(s.subs), added, s.Max)
	}
	if s.subs == nil {
		s.subs, s.pending = map[string]*messages.Presence{}, map[string]*pendingSnap{}
	}
	s.pending[requestID] = ps
	asks := make([]string, 0, len(ps.want))
	for target := range ps.want {
		s.subs[target] = nil
		asks = append(asks, target)
	}
	return asks, nil
}

// Unsubscribe drops targets and returns those that were subscribed (their
// views are told); idempotent.
func (s *Sink) Unsubscribe(targets []string) []string {
	var dropped []string
	for _, target := range targets {
		if _, ok := s.subs[target]; ok {
			delete(s.subs, target)
			dropped = append(dropped, target)
		}
	}
	return dropped
}

// Targets returns every subscribed target with the presence last sent to
// the device for it (nil: none yet), for a re-attach after a topology
// change. The map is the sink's own: read it, do not keep it.
func (s *Sink) Targets() map[string]*messages.Presence { return s.subs }

// SnapshotPart records one view's answer to a subscribe. When the last
// target has answered it returns the snapshot frame, then the events held
// meanwhile that are still newer; otherwise nothing.
func (s *Sink) SnapshotPart(requestID, target string, visible bool, p *messages.Presence) []*messages.Frame {
	ps := s.pending[requestID]
	if ps == nil || !ps.want[target] {
		return nil
	}
	delete(ps.want, target)
	if visible && p != nil {
		ps.got = append(ps.got, p)
		if _, still := s.subs[p.GetUser()]; still { // not unsubscribed meanwhile: Max holds
			s.subs[p.GetUser()] = p
		}
	}
	if len(ps.want) > 0 {
		return nil
	}
	delete(s.pending, requestID)
	out := []*messages.Frame{{Kind: &messages.Frame_Snapshot{Snapshot: &messages.Snapshot{RequestId: requestID, Presences: ps.got}}}}
	for _, held := range ps.held {
		out = append(out, s.Event(held)...)
	}
	return out
}

// Event returns the presence frame of a change, or nothing if its version
// is not newer than what the device has or if it is held while a snapshot
// of its target is being put together.
func (s *Sink) Event(p *messages.Presence) []*messages.Frame {
	last, ok := s.subs[p.GetUser()]
	if !ok || p.GetVersion() <= last.GetVersion() {
		return nil
	}
	for _, ps := range s.pending {
		if ps.want[p.GetUser()] || containsUser(ps.got, p.GetUser()) {
			ps.held = append(ps.held, p)
			return nil
		}
	}
	s.subs[p.GetUser()] = p
	return []*messages.Frame{{Kind: &messages.Frame_Presence{Presence: p}}}
}

func containsUser(ps []*messages.Presence, user string) bool {
	for _, p := range ps {
		if p.GetUser() == user {
			return true
		}
	}
	return false
}
