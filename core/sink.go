package core

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/presence-im/presence/messages"
	"google.golang.org/protobuf/proto"
)

// MaxTargets bounds one subscribe request.
const MaxTargets = 1000

// MaxQueriesPending bounds the queries of one connection waiting for their
// views at once: one beyond is refused (429) until one is answered, so
// views that do not answer cannot make a node hold more.
const MaxQueriesPending = 4

// ErrQueriesPending is wrapped by a query over MaxQueriesPending.
var ErrQueriesPending = errors.New("too many queries waiting for answers")

// ErrTooManySubscriptions is wrapped by a subscribe that would take a
// connection over its Sink.Max (error frame 413, docs/protocol.md).
var ErrTooManySubscriptions = errors.New("too many subscriptions")

// Sink is one connection's subscriptions: the presence last sent to the
// device per target, and the subscribes whose snapshot is still being put
// together from the views' answers. It belongs to its connection, not to
// one goroutine: in production the connection actor (subscribes,
// snapshots, error frames) and the node's fan-out workers (events) both
// write it, one at a time under the lock that also guards the socket
// (actors.connOut), so that the order in which the sink decides is the
// order of the frames on the socket; a message per event to the actor
// instead cost a mailbox run per subscriber. Not safe for concurrent use
// without that lock. It
// keeps the device's promise that a subscribe answers with one snapshot
// before any change of its targets, and that versions never go back: an
// event that overtakes the snapshot is held until the snapshot is out, and
// an event not newer than what the device has is dropped.
//
// A target of the batched tier is merged: its changes wait in due (the
// latest one each) until Flush, which the connection calls once per batch
// window, sends them in one presence_batch frame, leaving out a target
// whose latest state is what the device already has (a flap within the
// window that ended where it began).
type Sink struct {
	// Max bounds the targets subscribed at once, over every request
	// (config.Limits.Subscriptions); 0: no bound.
	Max     int
	subs    map[string]*messages.Presence // target -> presence last sent (nil: none yet)
	pending map[string]*pendingSnap       // by request id
	batched map[string]bool               // targets of the batched tier
	due     map[string]*messages.Presence // batched target -> its latest change not yet sent
	// degraded: the node stopped pushing batched targets (Degrade); their
	// changes are kept in due, not sent, until Restore.
	degraded bool
}

// RestoredID is the request id of the snapshot that follows a restored
// frame.
const RestoredID = "restored"

// pendingSnap collects a subscribe's (or a query's) SnapshotParts; events
// for a subscribe's targets wait until the snapshot frame is out.
type pendingSnap struct {
	want  map[string]bool
	got   []*messages.Presence
	held  []*messages.Presence
	query bool // nothing subscribed: the parts only answer it
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
//
// tier applies to every target of the request: a target subscribed again
// takes the new tier (a change merged for it and not yet sent is dropped
// when it becomes realtime: the snapshot brings its state).
func (s *Sink) Subscribe(requestID string, targets []string, tier messages.Tier) ([]string, error) {
	if tier != messages.Tier_realtime && tier != messages.Tier_batched {
		return nil, fmt.Errorf("subscribe: tier %d: must be realtime or batched", tier)
	}
	ps, err := s.request("subscribe", requestID, targets)
	if err != nil {
		return nil, err
	}
	added := 0
	for target := range ps.want {
		if _, ok := s.subs[target]; !ok {
			added++
		}
	}
	if s.Max > 0 && len(s.subs)+added > s.Max {
		return nil, fmt.Errorf("subscribe: %w: %d subscribed and %d new, over the limit of %d per connection (max-subscriptions); unsubscribe first",
			ErrTooManySubscriptions, len(s.subs), added, s.Max)
	}
	if s.subs == nil {
		s.subs = map[string]*messages.Presence{}
	}
	if s.pending == nil {
		s.pending = map[string]*pendingSnap{}
	}
	s.pending[requestID] = ps
	asks := make([]string, 0, len(ps.want))
	for target := range ps.want {
		if _, ok := s.subs[target]; !ok { // subscribed again: what was sent stays the floor
			s.subs[target] = nil
		}
		s.setTier(target, tier)
		asks = append(asks, target)
	}
	return asks, nil
}

// request checks a subscribe's or a query's targets and request id and
// returns what collects its parts (not yet pending).
func (s *Sink) request(op, requestID string, targets []string) (*pendingSnap, error) {
	if len(targets) == 0 || len(targets) > MaxTargets {
		return nil, fmt.Errorf("%s: %d targets: must be 1 to %d", op, len(targets), MaxTargets)
	}
	if _, dup := s.pending[requestID]; dup {
		return nil, fmt.Errorf("%s: request_id %q is already pending", op, requestID)
	}
	ps := &pendingSnap{want: map[string]bool{}}
	for _, target := range targets {
		if err := ValidID("target", target); err != nil {
			return nil, fmt.Errorf("%s: %v", op, err)
		}
		ps.want[target] = true
	}
	return ps, nil
}

func (s *Sink) setTier(target string, tier messages.Tier) {
	if tier == messages.Tier_batched {
		if s.batched == nil {
			s.batched = map[string]bool{}
		}
		s.batched[target] = true
		return
	}
	delete(s.batched, target)
	delete(s.due, target)
}

// Query starts a query: the targets whose views must be asked for their
// presence, answered by one snapshot (SnapshotPart) and nothing
// subscribed. A bad request (as Subscribe's, or one over
// MaxQueriesPending: ErrQueriesPending) changes nothing.
func (s *Sink) Query(requestID string, targets []string) ([]string, error) {
	if n := s.Queries(); n >= MaxQueriesPending {
		return nil, fmt.Errorf("query: %w: %d, at most %d; retry when one is answered", ErrQueriesPending, n, MaxQueriesPending)
	}
	ps, err := s.request("query", requestID, targets)
	if err != nil {
		return nil, err
	}
	ps.query = true
	if s.pending == nil {
		s.pending = map[string]*pendingSnap{}
	}
	s.pending[requestID] = ps
	asks := make([]string, 0, len(ps.want))
	for target := range ps.want {
		asks = append(asks, target)
	}
	return asks, nil
}

// DropQueries forgets every query waiting for answers and returns their
// request ids, in order: after a membership change a view asked may have
// died with its node and never answer, and a query kept waiting for it
// would hold one of the connection's MaxQueriesPending for ever.
func (s *Sink) DropQueries() []string {
	var ids []string
	for id, ps := range s.pending {
		if ps.query {
			ids = append(ids, id)
			delete(s.pending, id)
		}
	}
	slices.Sort(ids)
	return ids
}

// Pending is the number of subscribes and queries waiting for answers.
func (s *Sink) Pending() int { return len(s.pending) }

// Queries is the number of queries waiting for answers.
func (s *Sink) Queries() int {
	n := 0
	for _, ps := range s.pending {
		if ps.query {
			n++
		}
	}
	return n
}

// Unsubscribe drops targets and returns those that were subscribed (their
// views are told); idempotent.
func (s *Sink) Unsubscribe(targets []string) []string {
	var dropped []string
	for _, target := range targets {
		if _, ok := s.subs[target]; ok {
			delete(s.subs, target)
			s.setTier(target, messages.Tier_realtime)
			dropped = append(dropped, target)
		}
	}
	return dropped
}

// Subscribed is the number of targets subscribed in real time and
// batched.
func (s *Sink) Subscribed() (realtime, batched int) {
	return len(s.subs) - len(s.batched), len(s.batched)
}

// Targets returns every subscribed target with the presence last sent to
// the device for it (nil: none yet), for a re-attach after a topology
// change. The map is the sink's own: read it, do not keep it.
func (s *Sink) Targets() map[string]*messages.Presence { return s.subs }

// SnapshotPart records one view's answer to a subscribe or a query. When
// the last target has answered it returns the snapshot frame, then the
// events held meanwhile that are still newer; otherwise nothing.
//
// Versions never go back on the wire: a subscribed target's answer older
// than what the device was already sent of it (a change pushed while the
// view's answer was on its way) carries that instead, and a query's answer
// newer than it is what the device has from then on, so that an older
// change pushed or batched later is dropped, and the restore's snapshot is
// not older.
func (s *Sink) SnapshotPart(requestID, target string, visible bool, p *messages.Presence) []*messages.Frame {
	ps := s.pending[requestID]
	if ps == nil || !ps.want[target] {
		return nil
	}
	delete(ps.want, target)
	if visible && p != nil {
		last, still := s.subs[p.GetUser()] // not unsubscribed meanwhile: Max holds
		if last.GetVersion() > p.GetVersion() {
			p = last
		}
		ps.got = append(ps.got, p)
		if still {
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
// is not newer than what the device has, if it is held while a snapshot of
// its target is being put together, or if its target is batched (it waits
// for Flush: Due says so).
func (s *Sink) Event(p *messages.Presence) []*messages.Frame {
	if !s.Take(p) {
		return nil
	}
	return []*messages.Frame{{Kind: &messages.Frame_Presence{Presence: p}}}
}

// Take is Event without making the frame: true if the device is to get p
// now, as a presence frame, and then the sink counts it as sent. The
// fan-out writes one frame, made once per event, to every subscriber whose
// sink takes it.
func (s *Sink) Take(p *messages.Presence) bool {
	user := p.GetUser()
	last, ok := s.subs[user]
	if !ok || p.GetVersion() <= last.GetVersion() {
		return false
	}
	for _, ps := range s.pending {
		if !ps.query && (ps.want[user] || containsUser(ps.got, user)) {
			ps.held = append(ps.held, p)
			return false
		}
	}
	if s.batched[user] {
		s.keepLatest(p)
		return false
	}
	s.subs[user] = p
	return true
}

// keepLatest keeps p as its batched target's change to send, if newer.
func (s *Sink) keepLatest(p *messages.Presence) {
	if d, ok := s.due[p.GetUser()]; ok && p.GetVersion() <= d.GetVersion() {
		return
	}
	if p.GetVersion() <= s.subs[p.GetUser()].GetVersion() {
		return
	}
	if s.due == nil {
		s.due = map[string]*messages.Presence{}
	}
	s.due[p.GetUser()] = p
}

// Due is the number of batched targets with a change waiting for Flush
// (none while degraded: nothing is flushed).
func (s *Sink) Due() int {
	if s.degraded {
		return 0
	}
	return len(s.due)
}

// Degrade stops pushing the batched targets: their changes are still kept,
// the latest each, for Restore, but not sent. It returns the targets the
// device must now pull, in order (nil: none, or degraded already). A
// target subscribed batched while degraded is degraded too.
func (s *Sink) Degrade() []string {
	if s.degraded || len(s.batched) == 0 {
		return nil
	}
	s.degraded = true
	return slices.Sorted(maps.Keys(s.batched))
}

// Degraded reports whether batched targets are pulled.
func (s *Sink) Degraded() bool { return s.degraded }

// Restore pushes batched targets again: a restored frame, then a snapshot
// (request id RestoredID) of every batched target with the latest state
// the sink knows of it, pushed or answered to a query while degraded (a
// target the viewer may not see is absent). Not degraded: nothing.
func (s *Sink) Restore() []*messages.Frame {
	if !s.degraded {
		return nil
	}
	s.degraded = false
	var ps []*messages.Presence
	for _, user := range slices.Sorted(maps.Keys(s.batched)) {
		p := s.subs[user]
		if d, ok := s.due[user]; ok && d.GetVersion() > p.GetVersion() {
			p = d
		}
		if p != nil {
			s.subs[user] = p
			ps = append(ps, p)
		}
	}
	clear(s.due)
	return []*messages.Frame{
		{Kind: &messages.Frame_Restored{Restored: &messages.Restored{}}},
		{Kind: &messages.Frame_Snapshot{Snapshot: &messages.Snapshot{RequestId: RestoredID, Presences: ps}}},
	}
}

// Flush returns the batched changes as one presence_batch frame, targets in
// order, and forgets them: the latest state of each target whose state is
// not the one the device already has (a flap that ended where it began
// sends nothing; its version is kept as the device's, so that no older
// change can follow). Nothing to send: no frame.
func (s *Sink) Flush() []*messages.Frame {
	if len(s.due) == 0 || s.degraded {
		return nil
	}
	var out []*messages.Presence
	for _, user := range slices.Sorted(maps.Keys(s.due)) {
		p := s.due[user]
		last, ok := s.subs[user]
		if !ok || p.GetVersion() <= last.GetVersion() {
			continue
		}
		s.subs[user] = p // a flap's too: an older change arriving late is dropped
		if last == nil || !SamePresence(last, p) {
			out = append(out, p)
		}
	}
	clear(s.due) // its size follows the subscriptions
	if len(out) == 0 {
		return nil
	}
	return []*messages.Frame{{Kind: &messages.Frame_PresenceBatch{PresenceBatch: &messages.PresenceBatch{Presences: out}}}}
}

// SamePresence reports whether a and b show the same, their versions
// aside.
func SamePresence(a, b *messages.Presence) bool {
	v := b.GetVersion()
	c := proto.Clone(a).(*messages.Presence)
	c.Version = v
	return proto.Equal(c, b)
}

func containsUser(ps []*messages.Presence, user string) bool {
	for _, p := range ps {
		if p.GetUser() == user {
			return true
		}
	}
	return false
}
