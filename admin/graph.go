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

// Graph is a user's actors across the cluster (GET /api/users/{user}/graph):
// each device's connection and lease, and the view.
type Graph struct {
	User    string      `json:"user"`
	View    GraphView   `json:"view"`
	Devices []GraphEdge `json:"devices"`
	// Unanswered lists the members that did not say in time which of the
	// user's lease and view actors they hold.
	Unanswered []string `json:"unanswered,omitempty"`
}

// GraphView is the user's view actor; State is what the actor itself
// answered (subscribers by node, a pending offline, settling), absent if
// its node did not answer.
type GraphView struct {
	Node        string     `json:"node"`
	Status      string     `json:"status"` // online, offline, or settling (unknown)
	Version     uint64     `json:"version"`
	Subscribers uint32     `json:"subscribers"`
	State       *ViewActor `json:"state,omitempty"`
}

// GraphEdge is one device: its connection's node and its lease's; Lease
// is what the lease actor answered (its expiry), absent if its node did
// not answer.
type GraphEdge struct {
	Device    string      `json:"device"`
	ConnNode  string      `json:"conn_node"`
	ConnID    string      `json:"conn_id"`
	LeaseNode string      `json:"lease_node"`
	Epoch     uint64      `json:"epoch"`
	Since     string      `json:"since"`
	Lease     *LeaseState `json:"lease,omitempty"`
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
	found := s.userActors(ctx, user)
	g.Unanswered = found.missing
	if v, ok := found.get(g.View.Node, user); ok {
		g.View.State = v.View
	}
	for _, d := range st.GetDevices() {
		e := GraphEdge{Device: d.GetDevice(), ConnNode: d.GetNode(), ConnID: d.GetConnId(), LeaseNode: s.Node.LeaseOwner(user, d.GetDevice()),
			Epoch: d.GetEpoch(), Since: time.UnixMilli(d.GetSinceMs()).UTC().Format(time.RFC3339Nano)}
		if l, ok := found.get(e.LeaseNode, user+"/"+d.GetDevice()); ok {
			e.Lease = l.Lease
		}
		g.Devices = append(g.Devices, e)
	}
	writeJSON(w, http.StatusOK, g)
}

// found is a user's lease and view actors on every member that answered:
// member -> key -> actor.
type found struct {
	actors  map[string]map[string]Actor
	missing []string
}

// get is the actor of key on member, or on any member if that one has
// none (the owner's name may be unknown for a moment after a change).
func (f found) get(member, key string) (Actor, bool) {
	if a, ok := f.actors[member][key]; ok {
		return a, true
	}
	for _, byKey := range f.actors {
		if a, ok := byKey[key]; ok {
			return a, true
		}
	}
	return Actor{}, false
}

// userActors asks every member at once for the user's leases (keys
// "user/...") and view (key "user"), the state read by each actor.
func (s *Server) userActors(ctx context.Context, user string) found {
	f := found{actors: map[string]map[string]Actor{}}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, q := range []*messages.ActorsQuery{
		{Kind: string(actors.KindLease), Prefix: user + "/", Limit: actors.MaxActorsPage},
		{Kind: string(actors.KindView), Prefix: user, Limit: 1},
	} {
		wg.Go(func() {
			pages, missing := s.Node.InspectAll(ctx, q)
			mu.Lock()
			defer mu.Unlock()
			f.missing = appendNew(f.missing, missing...)
			for member, p := range pages {
				if f.actors[member] == nil {
					f.actors[member] = map[string]Actor{}
				}
				for _, a := range p.GetActors() {
					f.actors[member][a.GetKey()] = toActor(a)
				}
			}
		})
	}
	wg.Wait()
	return f
}

// appendNew appends what list does not hold yet.
func appendNew(list []string, add ...string) []string {
	for _, a := range add {
		if !slices.Contains(list, a) {
			list = append(list, a)
		}
	}
	return list
}
