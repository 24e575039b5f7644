package admin

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/presence-im/presence/actors"
	"github.com/presence-im/presence/messages"
)

// History bounds: events kept, transitions kept per member, members kept,
// cluster samples kept (one every SampleEvery: ten minutes).
const (
	DefaultHistory = 2048
	maxTransitions = 32
	maxMembers     = 256
	maxSamples     = 120
	SampleEvery    = 5 * time.Second
)

// History keeps what a page opened late must still show: the last events
// every member sent this node (a ring), each member's membership timeline
// and the cluster's connections and actors over the last minutes. Memory is
// bounded by the constants above. Safe for concurrent use.
type History struct {
	mu       sync.Mutex
	ring     []Event
	next     int
	timeline map[string][]Transition
	members  []string // in the order first seen, to evict the oldest
	samples  []Sample
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
// are the devices connected).
type Sample struct {
	AtMs   int64          `json:"at_ms"`
	Actors map[string]int `json:"actors"`
}

// NewHistory makes a history of capacity events (0: DefaultHistory).
func NewHistory(capacity int) *History {
	if capacity <= 0 {
		capacity = DefaultHistory
	}
	return &History{ring: make([]Event, 0, capacity), timeline: map[string][]Transition{}}
}

// Run subscribes to every member's events (as a GET /api/events stream
// does; again every SampleEvery, since a subscription sent as a member
// joins can arrive before its events actor exists) and samples the
// cluster's actors every SampleEvery, until ctx ends.
func (h *History) Run(ctx context.Context, n *actors.Node) {
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
			n.Resubscribe()
			sctx, cancel := context.WithTimeout(ctx, SampleEvery/2)
			counts, _ := n.ClusterCounts(sctx)
			cancel()
			h.sample(counts)
		}
	}
}

func (h *History) sample(counts map[string]map[string]int) {
	total := map[string]int{}
	for _, c := range counts {
		for k, v := range c {
			total[k] += v
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.samples = append(h.samples, Sample{AtMs: time.Now().UnixMilli(), Actors: total})
	if len(h.samples) > maxSamples {
		h.samples = slices.Delete(h.samples, 0, len(h.samples)-maxSamples)
	}
}

// Add records an event, evicting the oldest when full.
func (h *History) Add(ev Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.ring) < cap(h.ring) {
		h.ring = append(h.ring, ev)
	} else {
		h.ring[h.next] = ev
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
func (h *History) transition(member, state string, ev Event) {
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

// Snapshot copies the history.
func (h *History) Snapshot() Snapshot {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := Snapshot{Capacity: cap(h.ring), Events: make([]Event, 0, len(h.ring)), Members: map[string][]Transition{}, Samples: slices.Clone(h.samples)}
	s.Events = append(append(s.Events, h.ring[h.next:]...), h.ring[:h.next]...)
	for m, tl := range h.timeline {
		s.Members[m] = slices.Clone(tl)
	}
	if s.Samples == nil {
		s.Samples = []Sample{}
	}
	return s
}

func (s *Server) history(w http.ResponseWriter, _ *http.Request) {
	if s.History == nil {
		writeJSON(w, http.StatusOK, NewHistory(1).Snapshot())
		return
	}
	writeJSON(w, http.StatusOK, s.History.Snapshot())
}

func toEvent(ev *messages.ObsEvent) Event {
	return Event{Kind: ev.GetKind(), Node: ev.GetNode(), AtMs: ev.GetAtMs(), User: ev.GetUser(), Device: ev.GetDevice(),
		Gateway: ev.GetGateway(), Reason: ev.GetReason(), Status: ev.GetStatus(), LatencyMs: ev.GetLatencyMs(), Member: ev.GetMember()}
}

// Graph is a user's actors across the cluster (GET /api/users/{user}/graph):
// each device's connection and lease, and the view.
type Graph struct {
	User    string      `json:"user"`
	View    GraphView   `json:"view"`
	Devices []GraphEdge `json:"devices"`
}

// GraphView is the user's view actor.
type GraphView struct {
	Node        string `json:"node"`
	Status      string `json:"status"` // online, offline, or settling (unknown)
	Version     uint64 `json:"version"`
	Subscribers uint32 `json:"subscribers"`
}

// GraphEdge is one device: its connection's node and its lease's.
type GraphEdge struct {
	Device    string `json:"device"`
	ConnNode  string `json:"conn_node"`
	ConnID    string `json:"conn_id"`
	LeaseNode string `json:"lease_node"`
	Epoch     uint64 `json:"epoch"`
	Since     string `json:"since"`
}

func (s *Server) graph(w http.ResponseWriter, r *http.Request) {
	user := r.PathValue("user")
	ctx, cancel := context.WithTimeout(r.Context(), s.timeout())
	defer cancel()
	st, err := s.Node.Query(ctx, user)
	if err != nil && !errors.Is(err, actors.ErrSettling) {
		writeErr(w, status(err), err)
		return
	}
	g := Graph{User: user, Devices: []GraphEdge{}, View: GraphView{Node: s.Node.ViewOwner(user), Status: "offline", Version: st.GetVersion(), Subscribers: st.GetSubscribers()}}
	switch {
	case err != nil:
		g.View.Status = "settling"
	case st.GetOnline():
		g.View.Status = "online"
	}
	for _, d := range st.GetDevices() {
		g.Devices = append(g.Devices, GraphEdge{Device: d.GetDevice(), ConnNode: d.GetNode(), ConnID: d.GetConnId(), LeaseNode: s.Node.LeaseOwner(user, d.GetDevice()),
			Epoch: d.GetEpoch(), Since: time.UnixMilli(d.GetSinceMs()).UTC().Format(time.RFC3339Nano)})
	}
	writeJSON(w, http.StatusOK, g)
}
