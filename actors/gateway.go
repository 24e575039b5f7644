package actors

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/presence-im/presence/core"
	"github.com/presence-im/presence/messages"
)

// Socket is the connection actor's view of its device's WebSocket. Send
// must not block: it queues the frame and returns false when the outbox is
// full. Close may be called more than once.
type Socket interface {
	Send(f *messages.Frame) bool
	Close(code messages.CloseCode, reason string)
}

// ErrRefused wraps the lease's refusal of a handshake (HTTP 409).
var ErrRefused = errors.New("actors: handshake refused")

// gatewayActor is one node's gateway: the parent of its connection actors
// (connActor). Every check period it tells those that are due to check their
// staleness, and it routes ConnLost to them by conn id.
type gatewayActor struct {
	g      *Gateway
	env    *connEnv
	conns  map[string]*liveConn
	due    deadlines // conns by when to look at them next
	tick   timer
	recent []released // releases of the last replayWindow, oldest first
	replay timer
}

// released is a connection's release, kept by its gateway for a while in a
// cluster: one sent to a lease whose member was dying is lost, so after a
// membership change the gateway sends the recent ones again (epoch fencing
// refuses those that already counted).
type released struct {
	rel *messages.LeaseRelease
	at  time.Time
}

type replayReleases struct{}

// maxRecent bounds the releases a gateway keeps.
const maxRecent = 10000

// replayWindow is how far back releases are sent again: a member's
// failure is declared at most FailureDetection after it, and the
// re-created lease must have time to exist.
func (a *gatewayActor) replayWindow() time.Duration {
	t := a.env.timing
	return t.FailureDetection + t.Settle
}

// prune forgets the releases older than the replay window, or beyond
// maxRecent: those cut are cleared (the slice's array would keep them
// reachable until the next append moves it) and an empty slice lets its
// array go, so that a node whose devices all left holds none of their
// releases a window later.
func (a *gatewayActor) prune(now time.Time) {
	cut := 0
	for cut < len(a.recent) && (now.Sub(a.recent[cut].at) > a.replayWindow() || len(a.recent)-cut > maxRecent) {
		cut++
	}
	clear(a.recent[:cut])
	if a.recent = a.recent[cut:]; len(a.recent) == 0 {
		a.recent = nil
	}
	a.g.kept.Store(int64(len(a.recent)))
}

// Gateway messages (local).
type (
	spawnConn struct{ req OpenRequest }
)

func (a *gatewayActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		a.conns = map[string]*liveConn{}
		a.tick.arm(a.env.sched, a.env.timing.Check, ctx.Self(), checkTick{})
	case *actor.Stopping:
		a.tick.stop()
		a.replay.stop()
	case checkTick:
		// Re-armed each round rather than SendRepeatedly: proto.actor's
		// repeating timer reads its state without an atomic (a data race
		// under -race when cancelled while firing).
		a.tick.arm(a.env.sched, a.env.timing.Check, ctx.Self(), checkTick{})
		a.checkDue(ctx)
		a.prune(time.Now()) // releases age out with no new one too
	case *messages.ConnStatus: // from the user's view; the connection keeps the newest
		if c := a.conns[m.GetConnId()]; c != nil {
			ctx.Send(c.pid, m)
		}
	case spawnConn:
		a.spawn(ctx, m.req)
	case *messages.ConnLost: // from a lease: dropped if its member was declared dead
		if c := a.conns[m.GetConnId()]; c != nil && !a.env.stale.dropStale(ctx, m.GetConnId()) {
			ctx.Send(c.pid, m)
		}
	case topologyChanged:
		a.tell(ctx, reregister{})
		if len(a.recent) > 0 { // after the change reached every member
			a.replay.arm(a.env.sched, a.env.propagation, ctx.Self(), replayReleases{})
		}
	case released:
		a.recent = append(a.recent, m)
		a.prune(m.at)
	case replayReleases:
		a.prune(time.Now())
		for _, r := range a.recent {
			a.env.post.send(KindLease, leaseID(r.rel.GetUser(), r.rel.GetDevice()), r.rel)
		}
	case *actor.Terminated:
		a.forget(ctx, m.GetWho())
	}
}

// tell sends msg to every connection.
func (a *gatewayActor) tell(ctx actor.Context, msg any) {
	for _, c := range a.conns {
		ctx.Send(c.pid, msg)
	}
}

// checkDue tells the connections that are due to check their staleness:
// only those silent for stale, not every connection every check.
func (a *gatewayActor) checkDue(ctx actor.Context) {
	t := a.env.timing
	a.due.due(time.Now(), t.Check, func(pid *actor.PID) {
		a.env.metrics.StaleChecks.Inc()
		ctx.Send(pid, checkTick{})
	}, func(pid *actor.PID) { ctx.Send(pid, tokenExpired{}) })
}

// forget drops a connection actor that stopped. A child's PID id is the
// gateway's id, "/", its conn id (SpawnNamed in spawn): an index lookup, not
// a scan of every connection, so stopping N connections costs O(N), not
// O(N^2).
func (a *gatewayActor) forget(ctx actor.Context, who *actor.PID) {
	id := strings.TrimPrefix(who.GetId(), ctx.Self().GetId()+"/")
	if c := a.conns[id]; c != nil && c.pid.Equal(who) {
		c.gone = true // leaves the deadlines when it comes due
		delete(a.conns, id)
		a.g.conns.Add(-1)
	}
}

// spawn starts a connection actor and puts it in the deadlines, first due
// when it would be stale without a heartbeat.
func (a *gatewayActor) spawn(ctx actor.Context, r OpenRequest) {
	if a.conns[r.ConnID] != nil { // its birth would overwrite a live one's
		ctx.Respond(fmt.Errorf("actors: spawn connection %s: %w", r.ConnID, actor.ErrNameExists))
		return
	}
	birth := ctx.Self().GetId() + "/" + r.ConnID // the child's PID id
	a.env.births.leave(birth, connBirth{req: r})
	pid, err := ctx.SpawnNamed(a.g.connProps, r.ConnID)
	if err != nil {
		a.env.births.forget(birth)
		ctx.Respond(fmt.Errorf("actors: spawn connection %s: %w", r.ConnID, err))
		return
	}
	r.live.pid, r.live.due = pid, r.since.Add(r.live.stale)
	r.live.expires = expiryNanos(r.Expires)
	r.live.dueBy(r.live.expires)
	a.conns[r.ConnID] = r.live
	heap.Push(&a.due, r.live)
	a.g.conns.Add(1)
	ctx.Respond(pid)
}

// OpenRequest is a handshake that passed its checks up to the attempt.
type OpenRequest struct {
	User, Device string
	Attempt      uint64 // the device's connection attempt: the lease epoch
	ConnID       string // unique in the cluster
	Socket       Socket
	// The device's declared state at the handshake (?platform=,
	// ?activity=; zero: other, active) and heartbeat class (?class=; "":
	// standard).
	Platform messages.Platform
	Activity messages.Activity
	Class    string
	// Expires is when the device's credential expires (zero, or past
	// what Unix nanoseconds hold: never): the connection's socket is then
	// closed with messages.CloseTokenExpired, within a check period
	// (config.Timing.Check) of it. The gateway's deadlines look at it, so a
	// connection holds no timer of its own for it.
	Expires time.Time

	since time.Time // set by Open
	live  *liveConn // set by the gateway: where heartbeats leave their time
}

// Open claims the device's lease for a new connection and starts its
// connActor. A refused attempt (not above the device's floor) returns
// an error wrapping ErrRefused and core.ErrStaleAttempt and leaves nothing
// behind: no lease, no floor moved, no actor.
func (g *Gateway) Open(ctx context.Context, r OpenRequest) (*Conn, error) {
	if err := errors.Join(core.ValidID("user", r.User), core.ValidID("device", r.Device)); err != nil {
		return nil, err
	}
	if r.Attempt == 0 {
		return nil, fmt.Errorf("%w: attempt must be >= 1", ErrRefused)
	}
	timeout := requestTimeout(ctx)
	if timeout <= 0 {
		return nil, fmt.Errorf("actors: gateway %s: %w", g.node, context.DeadlineExceeded)
	}
	err := g.admit(ctx, r)
	var c *Conn
	if err == nil {
		c, err = g.open(ctx, r, timeout)
	}
	if err != nil && !errors.Is(err, ErrTooManyDevices) {
		// The admission's place is free again, one the view gave too late
		// for the handshake's deadline included.
		g.n.dir.Send(KindView, r.User, &messages.DeviceAdmitWithdraw{User: r.User, Device: r.Device})
	}
	return c, err
}

// open is Open once the user's view admitted the device.
func (g *Gateway) open(ctx context.Context, r OpenRequest, timeout time.Duration) (*Conn, error) {
	class, ok := g.n.deps.Timing.Class(r.Class)
	if !ok {
		return nil, fmt.Errorf("%w: heartbeat class %q: must be standard or battery", core.ErrBadState, r.Class)
	}
	r.Class = class.Name
	r.Platform = platformOr(r.Platform)
	r.since = time.Now()
	r.live = &liveConn{stale: class.Stale, beat: g.n.metrics.Heartbeats.WithLabelValues(platformLabel(r.Platform))}
	r.live.alive.Store(r.since.UnixNano())
	res, err := g.n.root.RequestFuture(g.pid, spawnConn{r}, timeout).Result()
	if err != nil {
		return nil, fmt.Errorf("actors: gateway %s: %w", g.node, err)
	}
	pid, ok := res.(*actor.PID)
	if !ok {
		return nil, res.(error)
	}
	holder := &messages.Holder{Node: g.node, ConnId: r.ConnID, Epoch: r.Attempt, Gateway: refOf(g.pid), SinceMs: r.since.UnixMilli()}
	state := core.NewDeviceState(r.Platform, r.Activity, r.since, g.n.deps.Timing.IdleAfter)
	state.Fill(holder) // the connection actor starts from the same
	ans, err := g.n.dir.Request(ctx, KindLease, leaseID(r.User, r.Device), &messages.LeaseAcquire{User: r.User, Device: r.Device, Holder: holder, Handshake: true})
	acq, _ := ans.(*messages.LeaseAcquired)
	if err != nil || !acq.GetOk() {
		_ = g.n.root.StopFuture(pid).Wait()
		if err != nil {
			// The lease may have accepted it and answered too late: release
			// it (fencing makes this harmless if it did not).
			g.n.dir.Send(KindLease, leaseID(r.User, r.Device), &messages.LeaseRelease{
				User: r.User, Device: r.Device, ConnId: r.ConnID, Epoch: r.Attempt, Reason: messages.EndReason_close, LastAliveMs: time.Now().UnixMilli(),
			})
			return nil, err
		}
		if acq.GetError() == core.ErrStaleAttempt.Error() {
			return nil, fmt.Errorf("%w: %w (attempt %d, floor %d)", ErrRefused, core.ErrStaleAttempt, r.Attempt, acq.GetFloor())
		}
		return nil, fmt.Errorf("%w: %s", ErrRefused, acq.GetError())
	}
	g.n.root.Send(pid, connActivate{})
	return &Conn{n: g.n, pid: pid, live: r.live, ID: r.ConnID, Epoch: r.Attempt}, nil
}

// ErrTooManyDevices wraps a handshake refused because its user has
// Limits.Devices devices online and it is not one of them (HTTP 403).
var ErrTooManyDevices = errors.New("actors: too many devices online")

// admit asks the user's view whether the device may come online
// (core.View.Admit), before anything is written for it.
func (g *Gateway) admit(ctx context.Context, r OpenRequest) error {
	limit := g.n.deps.Limits.Devices
	ans, err := g.n.dir.Request(ctx, KindView, r.User, &messages.DeviceAdmit{User: r.User, Device: r.Device, Limit: uint32(limit)})
	if err != nil {
		return fmt.Errorf("actors: gateway %s: %w", g.node, err)
	}
	if a, _ := ans.(*messages.DeviceAdmitted); !a.GetOk() {
		g.n.metrics.Refused.WithLabelValues(LimitDevices).Inc()
		return fmt.Errorf("%w: user %s has %d devices online, the limit (max-devices %d): %s is not one of them",
			ErrTooManyDevices, r.User, a.GetDevices(), limit, r.Device)
	}
	return nil
}

// Refused counts a request the socket layer refused by one of its own
// limits (presence_limit_refusals_total{limit}).
func (g *Gateway) Refused(limit string) { g.n.metrics.Refused.WithLabelValues(limit).Inc() }

// requestTimeout is what is left of ctx, or 5 s without a deadline.
func requestTimeout(ctx context.Context) time.Duration {
	if dl, ok := ctx.Deadline(); ok {
		return time.Until(dl)
	}
	return 5 * time.Second
}

// Conn is the handle the socket layer uses to feed its connActor.
// Its methods only enqueue messages or store atomics, and never block.
type Conn struct {
	n     *Node
	pid   *actor.PID
	live  *liveConn
	ID    string
	Epoch uint64
}

// Heartbeat records a heartbeat frame (seq >= 1, with the client's time in
// Unix ms, 0 if none) or a Ping or Pong (seq 0): its time goes into the
// connection's atomic last sign of life, which the gateway's deadlines and
// the actor's stale check read, with no message: a message per heartbeat
// would cost the node a mailbox run per beat (BENCHMARKS.md, "What limits
// each figure"). The sequence goes through core.Beats; only a seq that did
// not grow (counted) or a tripped drift fuse is sent to the actor. Calls
// for one connection come from its socket's reads, one at a time.
func (c *Conn) Heartbeat(seq uint64, clientTS int64) {
	c.live.alive.Store(time.Now().UnixNano())
	if seq == 0 {
		return
	}
	c.live.beat.Inc()
	c.live.mu.Lock()
	res := c.live.beats.Beat(seq, clientTS)
	c.live.mu.Unlock()
	if res.Restart {
		c.n.root.Send(c.pid, connBeat{seq})
	}
	if res.Drift != nil {
		c.n.root.Send(c.pid, connDrift{*res.Drift})
	}
}

// Closed reports that the socket closed (by the device or an I/O error).
func (c *Conn) Closed() { c.n.root.Send(c.pid, connClosed{}) }

// Subscribe asks for a snapshot of targets and their changes, in tier.
func (c *Conn) Subscribe(requestID string, targets []string, tier messages.Tier) {
	c.n.root.Send(c.pid, connSubscribe{requestID, targets, tier})
}

// Query asks for the presence of targets once (a snapshot), nothing
// subscribed.
func (c *Conn) Query(requestID string, targets []string) {
	c.n.root.Send(c.pid, connQuery{requestID, targets})
}

// Unsubscribe stops the changes of targets; idempotent.
func (c *Conn) Unsubscribe(targets []string) { c.n.root.Send(c.pid, connUnsubscribe{targets}) }

// SetShow sets the user's show alone.
func (c *Conn) SetShow(show messages.Show) { c.SetStatus(show, "", 0) }

// SetStatus sets the user's show and status text until expiresMs (Unix ms;
// 0: until changed). The socket layer checked them (core.ValidStatus).
func (c *Conn) SetStatus(show messages.Show, text string, expiresMs int64) {
	c.n.root.Send(c.pid, connShow{show: show, text: text, expiresMs: expiresMs})
}

// SetActivity declares the device's activity (checked: core.ValidActivity).
func (c *Conn) SetActivity(a messages.Activity) { c.n.root.Send(c.pid, connActivity{a}) }

// StateSync is the device's answer to a state sync request.
func (c *Conn) StateSync(nonce string, a messages.Activity) {
	c.n.root.Send(c.pid, connStateSync{nonce, a})
}

// platformOr is p, or other when none is given.
func platformOr(p messages.Platform) messages.Platform {
	if p == messages.Platform_platform_unspecified {
		return messages.Platform_other
	}
	return p
}
