package admin

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/presence-im/presence/actors"
	"github.com/presence-im/presence/messages"
)

// maxActorsQuery bounds the q and after parameters of GET /api/actors.
const maxActorsQuery = 512

// ActorsPage is GET /api/actors: one page of a member's live actors of one
// kind, in key order, each with the state the actor itself answered.
type ActorsPage struct {
	Node   string  `json:"node"`
	Kind   string  `json:"kind"`
	Total  int     `json:"total"`          // live actors of the kind on the node
	Next   string  `json:"next,omitempty"` // pass as after= for the next page
	Actors []Actor `json:"actors"`
}

// Actor is one actor and its state; Unanswered: it stopped, or did not
// answer in time (its state is unknown).
type Actor struct {
	Key        string        `json:"key"`
	PID        string        `json:"pid"`
	Unanswered bool          `json:"unanswered,omitempty"`
	Lease      *LeaseState   `json:"lease,omitempty"`
	View       *ViewActor    `json:"view,omitempty"`
	Connection *ConnState    `json:"connection,omitempty"`
	Gateway    *GatewayState `json:"gateway,omitempty"`
}

// LeaseState is a lease actor's state. With a holder: its connection and
// node, and the time to expiry (renewal + TTL); without: why it ended.
type LeaseState struct {
	HolderNode   string `json:"holder_node,omitempty"`
	HolderConn   string `json:"holder_conn,omitempty"`
	Epoch        uint64 `json:"epoch"`
	Floor        uint64 `json:"floor"`
	ExpiresInMs  int64  `json:"expires_in_ms"` // negative: overdue (its node stalled)
	RenewedAgoMs int64  `json:"renewed_ago_ms"`
	Ended        string `json:"ended,omitempty"`
}

// ViewActor is a view actor's state: subscribers by node, a pending
// offline's time to publication, and the settle window after a move.
type ViewActor struct {
	Status       string            `json:"status"` // online, offline, settling
	Version      uint64            `json:"version"`
	Devices      int               `json:"devices"`
	Subscribers  map[string]uint32 `json:"subscribers"`
	DebounceInMs int64             `json:"debounce_in_ms,omitempty"`
	Settled      bool              `json:"settled"`
	SettleInMs   int64             `json:"settle_in_ms,omitempty"`
	LastSeen     string            `json:"last_seen,omitempty"`
}

// ConnState is a connection actor's state.
type ConnState struct {
	User           string `json:"user"`
	Device         string `json:"device"`
	ConnID         string `json:"conn_id"`
	Epoch          uint64 `json:"epoch"`
	Gateway        string `json:"gateway"`
	LastAliveAgoMs int64  `json:"last_alive_ago_ms"`
	Since          string `json:"since"`
	Active         bool   `json:"active"`
	Subscriptions  uint32 `json:"subscriptions"`
}

// GatewayState is a gateway actor's state.
type GatewayState struct {
	Connections uint32 `json:"connections"`
}

// actorsQuery reads and checks GET /api/actors's parameters.
func actorsQuery(r *http.Request) (node string, q *messages.ActorsQuery, err error) {
	v := r.URL.Query()
	q = &messages.ActorsQuery{Kind: v.Get("kind"), Prefix: v.Get("q"), After: v.Get("after"), Limit: actors.DefaultActorsPage}
	if !slices.Contains(actors.InspectKinds, q.Kind) {
		return "", nil, fmt.Errorf("admin: kind %q: must be one of %s", q.Kind, strings.Join(actors.InspectKinds, ", "))
	}
	if l := v.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > actors.MaxActorsPage {
			return "", nil, fmt.Errorf("admin: limit %q: must be 1 to %d", l, actors.MaxActorsPage)
		}
		q.Limit = uint32(n)
	}
	if len(q.Prefix) > maxActorsQuery || len(q.After) > maxActorsQuery {
		return "", nil, fmt.Errorf("admin: q and after are at most %d bytes", maxActorsQuery)
	}
	return v.Get("node"), q, nil
}

// actorsPage answers GET /api/actors: node (a member id; this node when
// empty), kind, q (key prefix), after (cursor), limit.
func (s *Server) actorsPage(w http.ResponseWriter, r *http.Request) {
	node, q, err := actorsQuery(r)
	if err != nil {
		writeErr(w, http.StatusBadRequest, err)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.timeout())
	defer cancel()
	page, err := s.Node.Inspect(ctx, node, q)
	switch {
	case errors.Is(err, actors.ErrUnknownMember):
		writeErr(w, http.StatusNotFound, err)
	case err != nil:
		writeErr(w, http.StatusServiceUnavailable, err)
	default:
		writeJSON(w, http.StatusOK, toActorsPage(page))
	}
}

func toActorsPage(p *messages.ActorsPage) ActorsPage {
	out := ActorsPage{Node: p.GetNode(), Kind: p.GetKind(), Total: int(p.GetTotal()), Next: p.GetNext(), Actors: []Actor{}}
	for _, a := range p.GetActors() {
		out.Actors = append(out.Actors, toActor(a))
	}
	return out
}

func toActor(a *messages.ActorState) Actor {
	out := Actor{Key: a.GetKey(), PID: a.GetPid(), Unanswered: a.GetUnanswered()}
	if l := a.GetLease(); l != nil {
		h := l.GetHolder()
		out.Lease = &LeaseState{HolderNode: h.GetNode(), HolderConn: h.GetConnId(), Epoch: h.GetEpoch(), Floor: l.GetFloor(),
			ExpiresInMs: l.GetExpiresInMs(), RenewedAgoMs: l.GetRenewedAgoMs()}
		if h == nil && l.GetEnded() != messages.EndReason_end_reason_unspecified {
			out.Lease.Ended = l.GetEnded().String()
		}
	}
	if v := a.GetView(); v != nil {
		out.View = &ViewActor{Status: v.GetStatus(), Version: v.GetVersion(), Devices: int(v.GetDevices()), Subscribers: v.GetSubscribers(),
			DebounceInMs: v.GetDebounceInMs(), Settled: v.GetSettled(), SettleInMs: v.GetSettleInMs()}
		if out.View.Subscribers == nil {
			out.View.Subscribers = map[string]uint32{}
		}
		if v.GetLastSeenMs() != 0 {
			out.View.LastSeen = time.UnixMilli(v.GetLastSeenMs()).UTC().Truncate(time.Minute).Format(time.RFC3339)
		}
	}
	if c := a.GetConnection(); c != nil {
		out.Connection = &ConnState{User: c.GetUser(), Device: c.GetDevice(), ConnID: c.GetConnId(), Epoch: c.GetEpoch(), Gateway: c.GetGateway(),
			LastAliveAgoMs: c.GetLastAliveAgoMs(), Since: time.UnixMilli(c.GetSinceMs()).UTC().Format(time.RFC3339Nano), Active: c.GetActive(),
			Subscriptions: c.GetSubscriptions()}
	}
	if g := a.GetGateway(); g != nil {
		out.Gateway = &GatewayState{Connections: g.GetConnections()}
	}
	return out
}
