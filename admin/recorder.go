package admin

import (
	"context"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/presence-im/presence/actors"
	"github.com/presence-im/presence/messages"
)

// Recorder bounds: events kept, transitions kept per member, members kept,
// cluster samples kept (one every SampleEvery: ten minutes).
const (
	DefaultRecorderEvents = 2048
	maxTransitions        = 32
	maxMembers            = 256
	maxSamples            = 120
	sampleWidth           = 8 // members a sample has room for before the ring widens
	SampleEvery           = 5 * time.Second
)

// Recorder keeps what a page opened late must still show (GET
// /api/history): the last events every member sent this node (a ring),
// each member's membership timeline and the cluster's connections and
// actors over the last minutes. Not the store's HistoryStore (attempt
// floors, last-seen times). Memory is bounded by the constants above.
// Safe for concurrent use.
type Recorder struct {
	mu       sync.Mutex
	ring     []slot
	next     int
	timeline map[string][]Transition
	members  []string // in the order first seen, to evict the oldest
	samples  *samples
}

// Transition is one change of a member's state as a node saw it: alive,
// dead, left, fenced (the member's own note), drain, or rejoined
// (alive after dead, left or fenced).
type Transition struct {
	State  string `json:"state"`
	AtMs   int64  `json:"at_ms"`
	SeenBy string `json:"seen_by"`
}

// Sample is the cluster's live actors by kind at one time (connections
// are the devices connected), and the lease renewals each member that
// answered had accepted since it started (the page draws renewals per
// second from two samples, member by member, so a restart is no drop).
type Sample struct {
	AtMs     int64             `json:"at_ms"`
	Actors   map[string]int    `json:"actors"`
	Renewals map[string]uint64 `json:"renewals"`
}

// NewRecorder makes a recorder of capacity events (0: DefaultRecorderEvents).
func NewRecorder(capacity int) *Recorder {
	if capacity <= 0 {
		capacity = DefaultRecorderEvents
	}
	return &Recorder{ring: make([]slot, 0, capacity), timeline: map[string][]Transition{}, samples: newSamples(sampleWidth)}
}

// slotText is the bytes a ring slot holds for its event's strings; at
// most 255, so that each string's length fits a slot's uint8.
const slotText = 160

// slot is one event of the ring with its strings copied into the slot
// itself, allocated once with the ring. Kept as they came, the strings
// (up to eight small objects an event, each allocated apart when the event
// was decoded, over the seconds the ring covers) would each keep the span
// they landed in among the garbage of their time in use, and the heap in
// use is what RSS follows (docs/architecture.md, "Memory"). An event whose
// strings do not fit (ids far longer than usual) is kept as it came, in
// big.
type slot struct {
	at, latency int64
	lens        [8]uint8 // Kind, Node, User, Device, Gateway, Reason, Status, Member
	text        [slotText]byte
	big         *Event
}

func (s *slot) set(ev Event) {
	n := 0
	for i, f := range [8]string{ev.Kind, ev.Node, ev.User, ev.Device, ev.Gateway, ev.Reason, ev.Status, ev.Member} {
		if n+len(f) > slotText {
			big := ev // allocated here only: ev itself stays on the stack
			*s = slot{big: &big}
			return
		}
		s.lens[i] = uint8(len(f))
		n += copy(s.text[n:], f)
	}
	s.at, s.latency, s.big = ev.AtMs, ev.LatencyMs, nil
}

func (s *slot) event() Event {
	if s.big != nil {
		return *s.big
	}
	var f [8]string
	n := 0
	for i, l := range s.lens {
		f[i] = string(s.text[n : n+int(l)])
		n += int(l)
	}
	return Event{Kind: f[0], Node: f[1], AtMs: s.at, User: f[2], Device: f[3], Gateway: f[4], Reason: f[5], Status: f[6], LatencyMs: s.latency, Member: f[7]}
}

// Run subscribes to every member's events (as a GET /api/events stream
// does, members that join later included) and samples the cluster's
// actors and lease renewals every SampleEvery, until ctx ends.
func (h *Recorder) Run(ctx context.Context, n *actors.Node) {
	ch, _ := n.Events(ctx)
	tick := time.NewTicker(SampleEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case ev := <-ch:
			h.Add(toEvent(ev))
		case <-tick.C:
			sctx, cancel := context.WithTimeout(ctx, SampleEvery/2)
			st := n.ClusterCounts(sctx)
			cancel()
			h.sample(st.Counts, st.Renewals)
		}
	}
}

func (h *Recorder) sample(counts map[string]map[string]int, renewals map[string]uint64) {
	total := map[string]int{}
	for _, c := range counts {
		for k, v := range c {
			total[k] += v
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.samples.add(time.Now().UnixMilli(), total, renewals)
}

// Add records an event, evicting the oldest when full.
func (h *Recorder) Add(ev Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.ring) < cap(h.ring) {
		h.ring = h.ring[:len(h.ring)+1]
		h.ring[len(h.ring)-1].set(ev)
	} else {
		h.ring[h.next].set(ev)
		h.next = (h.next + 1) % len(h.ring)
	}
	switch ev.Kind {
	case "member":
		h.transition(ev.Member, ev.Reason, ev)
	case "fence":
		h.transition(ev.Member, "fenced", ev)
	case "drain":
		h.transition(ev.Member, "drain", ev)
	}
}

// transition appends a member's new state, if it differs from the last
// one recorded (every member reports the same change).
func (h *Recorder) transition(member, state string, ev Event) {
	tl, known := h.timeline[member]
	if known && len(tl) > 0 {
		last := tl[len(tl)-1].State
		if last == state || last == "rejoined" && state == "alive" {
			return
		}
		if state == "alive" && (last == "dead" || last == "left" || last == "fenced" || last == "drain") {
			state = "rejoined"
		}
	}
	if !known {
		h.members = append(h.members, member)
		if len(h.members) > maxMembers {
			delete(h.timeline, h.members[0])
			h.members = h.members[1:]
		}
	}
	tl = append(tl, Transition{State: state, AtMs: ev.AtMs, SeenBy: ev.Node})
	if len(tl) > maxTransitions {
		tl = tl[1:]
	}
	h.timeline[member] = tl
}

// Snapshot is GET /api/history's answer.
type Snapshot struct {
	Capacity int                     `json:"capacity"`
	Events   []Event                 `json:"events"` // oldest first
	Members  map[string][]Transition `json:"members"`
	Samples  []Sample                `json:"samples"`
}

// Snapshot copies what the recorder keeps.
func (h *Recorder) Snapshot() Snapshot {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := Snapshot{Capacity: cap(h.ring), Events: make([]Event, 0, len(h.ring)), Members: map[string][]Transition{}, Samples: h.samples.list()}
	for _, part := range [][]slot{h.ring[h.next:], h.ring[:h.next]} {
		for i := range part {
			s.Events = append(s.Events, part[i].event())
		}
	}
	for m, tl := range h.timeline {
		s.Members[m] = slices.Clone(tl)
	}
	return s
}

func (s *Server) history(w http.ResponseWriter, _ *http.Request) {
	if s.Recorder == nil {
		writeJSON(w, http.StatusOK, NewRecorder(1).Snapshot())
		return
	}
	writeJSON(w, http.StatusOK, s.Recorder.Snapshot())
}

func toEvent(ev *messages.ObsEvent) Event {
	return Event{Kind: ev.GetKind(), Node: ev.GetNode(), AtMs: ev.GetAtMs(), User: ev.GetUser(), Device: ev.GetDevice(),
		Gateway: ev.GetGateway(), Reason: ev.GetReason(), Status: ev.GetStatus(), LatencyMs: ev.GetLatencyMs(), Member: ev.GetMember()}
}
