package actors

import (
	"context"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/presence-im/presence/core"
	"github.com/presence-im/presence/messages"
	"github.com/presence-im/presence/store"
)

// viewActor owns one user's core.View: devices up and down from the user's
// leases, the debounced offline, and the subscriber sinks it sends trimmed
// events to. It watches each sink, so a connection that dies without
// unsubscribing is dropped.
type viewActor struct {
	// mu is held while the actor handles a message; a lookup on another
	// goroutine reads the state under it (read) only if it is free.
	mu       sync.Mutex
	env      *viewEnv
	user     string
	v        *core.View
	sinks    map[string]*actor.PID
	received uint64 // directory messages handled (kept across a restart: births)
	queries  uint64 // ViewQuery among received: a view only looked up

	// told is, by device, the connection and status (its At in ms) the
	// view last told it (tellStatus).
	told map[string]toldStatus

	debounce, age, idle, settle, expiry timer
	idleGen                             uint64
	// reread reads the policy again while the last read failed
	// (armReread): policyUnread says it did, rereadIn is the back-off.
	reread                    timer
	rereadIn                  time.Duration
	policyUnread, rereadArmed bool
	started                   time.Time // activation
	mode                      string    // leave mode of the last departure (presence_offline_detection_seconds)
	hooked                    string    // what the webhooks were last told (hook.go)
	hookedAt                  uint64    // at which version
}

func (a *viewActor) Receive(ctx actor.Context) {
	a.mu.Lock()
	defer a.mu.Unlock()
	now := time.Now()
	before, stopping := viewCounts(a.v, false), false
	defer func() { a.env.metrics.viewDelta(before, viewCounts(a.v, stopping)) }()
	switch m := ctx.Message().(type) {
	case *actor.Started:
		a.onStarted(ctx, now)
	case *actor.Stopping, *actor.Restarting: // a restart (a panic) starts it anew
		stopping = true
		a.onStopping(ctx, m)
	case *messages.DeviceUp:
		a.env.life.handled(KindView, &a.received)
		a.onDeviceUp(ctx, m, now)
	case *messages.DeviceDown:
		a.env.life.handled(KindView, &a.received)
		a.onDeviceDown(ctx, m, now)
	case *messages.GatewayDown:
		a.mode = ModeGatewayCrash
		a.apply(ctx, a.v.GatewayDownBefore(m.GetNode(), openedBefore(m), lastHeard(m), now))
	case *messages.DeviceShow:
		a.env.life.handled(KindView, &a.received)
		a.onShow(ctx, m, now)
	case *messages.ViewSubscribe:
		a.env.life.handled(KindView, &a.received)
		a.loaded()
		a.subscribe(ctx, m, now)
	case *messages.ViewUnsubscribe:
		a.env.life.handled(KindView, &a.received)
		a.onUnsubscribe(ctx, m)
	case *messages.PolicyChanged: // sent, or requested (Node.ApplyPolicy)
		a.env.life.handled(KindView, &a.received)
		a.onPolicyChanged(ctx, now)
	case *messages.ViewQuery:
		a.env.life.handled(KindView, &a.received)
		a.onQuery(ctx, m.GetFloor(), now)
	case *messages.ActorStateQuery: // from the inspector, not the directory
		a.loaded()
		ctx.Respond(a.info(now))
	case *messages.DeviceAdmit:
		a.env.life.handled(KindView, &a.received)
		a.onAdmit(ctx, m, now)
	case *messages.DeviceAdmitWithdraw:
		a.env.life.handled(KindView, &a.received)
		a.v.Withdraw(m.GetDevice())
	case *actor.Terminated:
		a.onTerminated(ctx, m)
	default:
		a.onTimer(ctx, m, now)
	}
	if !stopping {
		a.armReread(ctx)
	}
}

// onTimer handles the view's own timers' messages.
func (a *viewActor) onTimer(ctx actor.Context, m any, now time.Time) {
	switch m := m.(type) {
	case debounceFired:
		a.onDebounce(ctx, m, now)
	case ageView: // a coarse recently turning long_ago, or the user's status expiring
		a.apply(ctx, a.v.Age(now))
	case settleView:
		a.onSettle(ctx, m, now)
	case idleCheck:
		a.onIdleCheck(ctx, m, now)
	case policyReread:
		a.onReread(ctx, now)
	}
}

// onShow sets the user's show. Going invisible fixes the last seen others
// may know at what it is now, the store's until the view's own departures
// (core.View.SetShow): a view not loaded reads it first, or a departure
// written since would stand in for it at the load.
func (a *viewActor) onShow(ctx actor.Context, m *messages.DeviceShow, now time.Time) {
	if m.GetShow() == messages.Show_invisible {
		a.loaded()
	}
	u := core.UserStatus{Show: m.GetShow(), Text: m.GetText(), At: time.UnixMilli(m.GetSetAtMs())}
	if ms := m.GetExpiresMs(); ms > 0 {
		u.Until = time.UnixMilli(ms)
	}
	if m.GetSetAtMs() == 0 { // from a node of an earlier version
		u.At = now
	}
	a.apply(ctx, a.v.SetStatus(u, m.GetReplay(), now))
	a.tellStatus(ctx)
}

// toldStatus is a status told to one connection: its conn id and At.
type toldStatus struct {
	conn string
	atMs int64
}

// tellStatus tells each live connection of the user the status the view
// holds, unless it was told it already: each keeps the newest it heard
// and tells it again after a failover (connActor.reregisterNow), so the
// status outlives the device that set it, and its node, while one of the
// user's devices is connected. Soft state: nothing is written. A status
// that expired is told as it was set, and a replay of it shows nothing.
func (a *viewActor) tellStatus(ctx actor.Context) {
	st := a.v.Status
	if st.At.IsZero() { // never set
		return
	}
	show := &messages.DeviceShow{User: a.user, Show: st.Show, Text: st.Text, SetAtMs: st.At.UnixMilli()}
	if !st.Until.IsZero() {
		show.ExpiresMs = st.Until.UnixMilli()
	}
	for dev, h := range a.v.Devices.All() {
		k, gw := toldStatus{h.GetConnId(), show.SetAtMs}, pidOf(h.GetGateway())
		if gw == nil || a.told[dev] == k {
			continue
		}
		if a.told == nil {
			a.told = map[string]toldStatus{}
		}
		a.told[dev] = k
		sendFrom(ctx, gw, &messages.ConnStatus{ConnId: h.GetConnId(), Epoch: h.GetEpoch(), Status: show})
	}
	for dev := range a.told {
		if !a.v.Devices.Has(dev) {
			delete(a.told, dev)
		}
	}
}

// onPolicyChanged applies the user's new policy to the subscribers; a view
// not loaded has none, and reads the new one at its first need.
func (a *viewActor) onPolicyChanged(ctx actor.Context, now time.Time) {
	if !a.v.Unloaded {
		a.apply(ctx, a.v.SetPolicy(a.policy(), now))
	}
	if ctx.Sender() != nil {
		ctx.Respond(&messages.PolicyChanged{User: a.user}) // applied
	}
}

// onAdmit answers whether the device may come online under the user's
// device limit, holding its place for admitHold.
func (a *viewActor) onAdmit(ctx actor.Context, m *messages.DeviceAdmit, now time.Time) {
	ok, n := a.v.Admit(m.GetDevice(), int(m.GetLimit()), now, now.Add(admitHold))
	ctx.Respond(&messages.DeviceAdmitted{Ok: ok, Devices: uint32(n)})
}

// onIdleCheck passivates an idle view, unless an admission holds its
// place or a message is on its way: then it checks again later.
func (a *viewActor) onIdleCheck(ctx actor.Context, m idleCheck, now time.Time) {
	if m.gen == a.idleGen && a.v.Idle() && (a.v.Admitting(now) || !a.env.life.passivate(ctx, KindView, a.user, a.received)) {
		a.armIdle(ctx)
	}
}

// onStarted makes the user's view without reading the store: a device's
// connect activates it (admission, then its device up) and needs neither
// the policy nor the last seen, which are read at the first message that
// does (loaded). A view activated soon after a membership change may
// replace one on another member, and waits to settle.
func (a *viewActor) onStarted(ctx actor.Context, now time.Time) {
	b := a.env.births.take(ctx).(identity)
	a.user, a.received = b.id, b.received
	a.env.life.activated(KindView, a.user, ctx.Self())
	a.v = core.NewUnloadedView(a.user, a.env.timing.Debounce) // read at the first need (loaded)
	a.started = now
	a.attach(ctx, a)
	a.armIdle(ctx)
	if a.env.place.mayHaveMoved(KindView, a.user) {
		a.unsettle(ctx, now)
	}
}

// onStopping ends the view; before a restart it leaves its birth for the
// instance that replaces it (births.go).
func (a *viewActor) onStopping(ctx actor.Context, m any) {
	if _, ok := m.(*actor.Restarting); ok {
		a.env.births.leave(ctx.Self().GetId(), identity{a.user, a.received})
	}
	a.attach(ctx, nil) // a restarted view reloads its state: lookups ask it until it started
	a.env.life.deactivated(KindView, a.user, ctx.Self())
	a.settle.stop()
	a.debounce.stop()
	a.age.stop()
	a.idle.stop()
	a.expiry.stop()
	a.reread.stop()
}

// onDeviceUp ignores a device up for a connection of an earlier
// incarnation of its node (Node.earlier).
func (a *viewActor) onDeviceUp(ctx actor.Context, m *messages.DeviceUp, now time.Time) {
	if a.env.place.earlier(m.GetHolder()) {
		a.env.log.Debug("view: device up from an earlier incarnation of its node ignored", "user", a.user, "device", m.GetDevice(), "node", m.GetHolder().GetNode())
		return
	}
	a.apply(ctx, a.v.DeviceUp(m.GetDevice(), m.GetHolder(), now))
	a.tellStatus(ctx) // a new connection learns the status others set
}

func (a *viewActor) onDeviceDown(ctx actor.Context, m *messages.DeviceDown, now time.Time) {
	if !a.v.Devices.Has(m.GetDevice()) {
		a.evidence(ctx, now) // the device was up at an earlier incarnation
	}
	a.mode = leaveMode(m.GetReason())
	a.apply(ctx, a.v.DeviceDown(m.GetDevice(), m.GetEpoch(), time.UnixMilli(m.GetLastAliveMs()), now))
}

func (a *viewActor) onUnsubscribe(ctx actor.Context, m *messages.ViewUnsubscribe) {
	if sink := pidOf(m.GetSink()); sink != nil {
		a.drop(ctx, sink)
	}
	a.apply(ctx, core.ViewResult{})
}

// onQuery answers a lookup (Node.Query). A view that nothing but lookups
// reached since it started, with nothing live, stops at once instead of
// after Timing.Idle: an admin lookup of a user nobody has seen leaves no
// actor behind (docs/operations.md "Limits"). An unsettled one stays: its
// devices may be re-registering.
func (a *viewActor) onQuery(ctx actor.Context, floor uint64, now time.Time) {
	a.queries++
	a.loaded()
	a.recheck(ctx, now)
	if floor > 0 { // and above what an earlier incarnation published: versions are at least the wall time
		a.v.Raise(max(floor, uint64(now.UnixMilli())))
	}
	ctx.Respond(a.state())
	if a.queries == a.received && a.v.Idle() && !a.v.Unsettled {
		a.env.life.passivate(ctx, KindView, a.user, a.received)
	}
}

// attach lets lookups read the state of view (nil: none) while it is the
// user's actor in the directory (viewReader).
func (a *viewActor) attach(ctx actor.Context, view *viewActor) {
	if r := a.env.reader; r != nil {
		r.attachView(a.user, ctx.Self(), view)
	}
}

// read is what onQuery would answer a ViewQuery handled now, for a lookup
// on another goroutine (LocalDirectory.readView, under the directory's
// lock, sent the directory messages sent to this view), or readAsk where
// that answer may differ and the lookup must ask the actor:
//
//   - the actor is handling a message (its lock is taken; a stopping or
//     restarting one also detached itself: a restarted view reloads its
//     state);
//   - a directory message sent to it is not handled yet (received < sent):
//     a lookup queued behind it would see its effect;
//   - the view holds nothing (core.View.Idle): a query may passivate it;
//   - a query may still unsettle it (recheck: young after a membership
//     change that may have moved it here).
//
// A view that has not read the store yet (its devices' connects did not
// need it) answers readLoad: the lookup reads it (viewEnv.readStore) and
// calls read again with what it read, which the view then keeps as
// onQuery's own read would (loaded).
//
// So a lookup reads the same state, in the same order with the messages
// sent before it, as through the mailbox; a timer's message (debounce,
// age, settle) is not a directory message and races a lookup either way.
func (a *viewActor) read(sent uint64, now time.Time, load *viewLoad) (*messages.ViewState, readAnswer) {
	if !a.mu.TryLock() {
		return nil, readAsk
	}
	defer a.mu.Unlock()
	if a.v == nil || a.received != sent || a.v.Idle() {
		return nil, readAsk
	}
	if !a.v.Unsettled && now.Sub(a.started) < a.env.timing.Settle && a.env.place.mayHaveMoved(KindView, a.user) {
		return nil, readAsk
	}
	if a.v.Unloaded {
		if load == nil {
			return nil, readLoad
		}
		a.v.Load(load.policy, load.lastSeen)
	}
	return a.state(), readDone
}

// readAnswer is what a view's read gives a lookup.
type readAnswer int

const (
	readAsk  readAnswer = iota // ask the actor
	readDone                   // the state read is the answer
	readLoad                   // read the store and call read again with it
)

// viewLoad is what a lookup read from the store for a view (readStore).
type viewLoad struct {
	policy   *core.Policy
	lastSeen time.Time
}

// admitHold is how long a device admitted by core.View.Admit holds its
// place without coming up: longer than a handshake (5 s, gateway).
const admitHold = 10 * time.Second

// recheck unsettles a young view on a subscribe or query: its node may have
// heard of the change that moved it here only after activating it (members
// hear up to a propagation apart).
func (a *viewActor) recheck(ctx actor.Context, now time.Time) {
	if !a.v.Unsettled && a.env.place.mayHaveMoved(KindView, a.user) {
		a.evidence(ctx, now)
	}
}

// onDebounce publishes a debounced offline, unless the timer is stale
// (re-arming it would cancel the live one) or the gate holds it: after a
// stall a device may be back in what came meanwhile.
func (a *viewActor) onDebounce(ctx actor.Context, m debounceFired, now time.Time) {
	if m.gen == a.v.Gen && a.env.guard.gate(ctx, gate{&a.debounce, m, KindView, a.user}) {
		a.apply(ctx, a.v.DebounceFired(m.gen, now))
	}
}

// onSettle publishes what the view learnt in its window, unless a change
// came later: its re-registrations are still to come, whether it moved the
// view or only a lease of the user's devices (a member holding it declared
// dead after the view's activation: that device re-registers only then;
// in the chaos harness's 2+2+1 lease partition one came 252 ms after the
// activation's settle, a false offline).
func (a *viewActor) onSettle(ctx actor.Context, m settleView, now time.Time) {
	if left := a.settleLeft(now); a.v.Unsettled && left > 0 {
		a.settle.arm(a.env.sched, left, ctx.Self(), m)
		return
	}
	if !a.env.guard.gate(ctx, gate{&a.settle, m, KindView, a.user}) {
		return
	}
	a.env.log.Debug("view: settled", "user", a.user, "devices", a.v.Devices.Len(), "online", a.v.Online, "subscribers", len(a.v.Subs))
	if a.v.Unsettled {
		a.mode = ModeOwnerCrash // re-created: its departures happened with the old view
	}
	a.apply(ctx, a.v.Settle(now))
}

// unsettle makes this view wait, until Timing.Settle after its activation
// or the latest membership change if later, for devices to re-register
// before it reports anyone offline: it may replace one on a member that
// died or moved. Once that window is over, re-attached subscribers get the
// state.
//
// From the latest change, not the activation alone (and a failure
// detection and settle after the activation at the latest): connections
// re-register up to a propagation and a random part of renew/2 after each
// change they hear of, and the change may have moved the view or only a
// lease of its devices (onSettle), so in a cascade of verdicts (a 2+2+1
// split: members declared dead one by one) a view activated at the first
// had settled, and published a device offline just before its
// re-registration came (the chaos harness, partition-2-2-1-lease: a false
// offline at the serving side).
func (a *viewActor) unsettle(ctx actor.Context, now time.Time) {
	if a.v.Unsettled {
		return
	}
	a.v.Unsettled = true
	a.settle.arm(a.env.sched, max(a.started.Add(a.env.timing.Settle).Sub(now), a.settleLeft(now), 0), ctx.Self(), settleView{})
}

// settleLeft is how long until Timing.Settle after the latest membership
// change (<= 0: passed), or after now while a member is silent (it may be
// dying: a lease of this view's devices there takes no re-register until
// its verdict moves it, and a side that holds the split-brain lease
// declares the others dead up to seconds apart: the chaos harness,
// partition-2-2-1-lease, a false offline at the side serving alone). At
// most until a failure detection and Settle after the view's activation:
// changes that keep coming (a rolling deploy, a member crash-looping) do
// not keep it unsettled for ever, holding its departures; the owner-crash
// bound counts from the crash the same way.
func (a *viewActor) settleLeft(now time.Time) time.Duration {
	t := a.env.timing
	from := a.env.place.lastChange()
	if a.env.place.silent() {
		from = now
	}
	return min(from.Add(t.Settle).Sub(now), a.started.Add(t.FailureDetection+t.Settle).Sub(now))
}

// evidence is a sign of an earlier incarnation of this view (a down for a
// device it never saw, a subscriber re-attaching): a young view unsettles
// even if its node had not yet heard of the change that moved it here when
// it was activated (members hear of a change up to a propagation apart).
func (a *viewActor) evidence(ctx actor.Context, now time.Time) {
	if now.Sub(a.started) < a.env.timing.Settle && a.env.place.mayHaveMoved(KindView, a.user) {
		a.unsettle(ctx, now)
	}
}

// policy loads the user's policy; a store error makes the user visible to
// nobody, rather than to the wrong viewers, until a read works: the next
// PolicyChanged or the view's own reread (armReread).
func (a *viewActor) policy() *core.Policy {
	doc, ok, err := a.env.policies.Get(context.Background(), a.user)
	a.noteRead(err)
	return policyFrom(doc, ok, err)
}

// noteRead keeps whether the last read of the policy failed: the view then
// shows its user to nobody and reads it again (armReread).
func (a *viewActor) noteRead(err error) {
	a.policyUnread = err != nil
	if err != nil {
		a.env.log.Debug("view: reading policy; visible to nobody", "user", a.user, "err", err)
	}
}

// policyFrom is a stored policy document as the view applies it: none
// (visible to nobody) when there is none or it could not be read.
func policyFrom(doc store.PolicyDoc, ok bool, err error) *core.Policy {
	if err != nil || !ok {
		return nil
	}
	return doc.Policy()
}

// policyReread is the self-message of a view whose policy read failed.
type policyReread struct{}

// maxReread caps the back-off between a view's policy reads while the
// store fails.
const maxReread = 30 * time.Second

// armReread reads the policy again while the last read failed, after
// store.RetryEvery, doubling up to maxReread: a view loaded while the
// store was down shows its user to nobody, and must not stay so once the
// store answers.
func (a *viewActor) armReread(ctx actor.Context) {
	if !a.policyUnread || a.rereadArmed {
		return
	}
	a.rereadIn = min(max(2*a.rereadIn, store.RetryEvery), maxReread)
	a.rereadArmed = true
	a.reread.arm(a.env.sched, a.rereadIn, ctx.Self(), policyReread{})
}

// onReread applies the policy read again, as a PolicyChanged does.
func (a *viewActor) onReread(ctx actor.Context, now time.Time) {
	a.rereadArmed = false
	if a.v.Unloaded { // reads it at its first need
		a.policyUnread = false
	} else {
		a.apply(ctx, a.v.SetPolicy(a.policy(), now))
	}
	if !a.policyUnread {
		a.rereadIn = 0
	}
}

// loaded reads the user's policy and last seen into the view if that is
// not done yet: before anything is trimmed for a viewer (a subscribe, a
// lookup) or shown (the inspector). Until then the view has no subscriber
// and publishes to no one; its departures go to the store, which keeps the
// latest last seen (core.View.Load).
func (a *viewActor) loaded() {
	if a.v.Unloaded {
		a.v.Load(a.load())
	}
}

// load reads what a view needs from the store (viewEnv.readStore).
func (a *viewActor) load() (*core.Policy, time.Time) {
	pol, last, err := a.env.readStore(context.Background(), a.user)
	a.noteRead(err)
	return pol, last
}

// readStore reads what a view of user needs, the user's policy and last
// seen: in one round trip when the policy store can (store.ViewLoader; an
// error then costs both: visible to nobody, never seen), else in two. err
// is the policy's read failing. It touches no view's state: a lookup calls
// it too (LocalDirectory.readView).
func (e *viewEnv) readStore(ctx context.Context, user string) (*core.Policy, time.Time, error) {
	if l, ok := e.policies.(store.ViewLoader); ok {
		doc, ok, last, err := l.LoadView(ctx, user)
		return policyFrom(doc, ok, err), last, err
	}
	last, err := e.history.LastSeen(ctx, user)
	if err != nil {
		e.log.Debug("view: reading last seen", "user", user, "err", err)
	}
	doc, ok, err := e.policies.Get(ctx, user)
	return policyFrom(doc, ok, err), last, err
}

// subscribe answers with a SnapshotPart sent to the sink itself, so that it
// is ordered before every event the sink gets from this view.
func (a *viewActor) subscribe(ctx actor.Context, m *messages.ViewSubscribe, now time.Time) {
	a.recheck(ctx, now)
	sink := pidOf(m.GetSink())
	if sink == nil {
		return
	}
	if m.GetQuery() { // answered, nothing registered
		p := a.v.Peek(m.GetViewer(), now)
		sendFrom(ctx, sink, &messages.SnapshotPart{RequestId: m.GetRequestId(), Target: a.user, Visible: p != nil, Presence: p})
		return
	}
	key := sinkKey(sink)
	if _, ok := a.sinks[key]; !ok {
		if a.sinks == nil { // at the first subscriber: most views have none
			a.sinks = map[string]*actor.PID{}
		}
		a.sinks[key] = sink
		ctx.Watch(sink)
	}
	if m.GetReattach() {
		res := core.ViewResult{}
		if _, known := a.v.Subs[key]; !known {
			a.evidence(ctx, now) // the sink subscribed to an earlier incarnation
			res = a.v.Reattach(key, m.GetViewer(), m.GetLast(), now)
		}
		a.apply(ctx, res)
		return
	}
	p, res := a.v.Subscribe(key, m.GetViewer(), now)
	sendFrom(ctx, sink, &messages.SnapshotPart{RequestId: m.GetRequestId(), Target: a.user, Visible: p != nil, Presence: p})
	a.apply(ctx, res)
}

// onTerminated drops a subscriber that ended, or watches it again if only
// the connection to it did (connectionOnly).
func (a *viewActor) onTerminated(ctx actor.Context, m *actor.Terminated) {
	if a.connectionOnly(m) {
		a.env.log.Debug("view: a subscriber's connection ended, not its node: watching it again", "user", a.user, "sink", m.GetWho().String())
		ctx.Watch(m.GetWho()) // over a new connection: a sink that is gone answers NotFound
		return
	}
	a.drop(ctx, m.GetWho())
	a.apply(ctx, core.ViewResult{})
}

// connectionOnly reports whether a sink's Terminated says only that
// proto.actor dropped its connection to the sink's node, which is alive:
// the sink may well be. proto.actor keys its connections on the address,
// and an earlier incarnation's connection at the same address (a fenced
// node re-executed at a fixed port, as in containers) that gives up
// retrying, or whose stream breaks after a heal, ends the new
// incarnation's connection too, with every watch over it: the view
// dropped live subscribers, which then missed the next change (the docker
// backend's partition scenario). A sink whose node was declared dead or
// left is dropped as before.
func (a *viewActor) connectionOnly(m *actor.Terminated) bool {
	return m.GetWhy() == actor.TerminatedReason_AddressTerminated && a.env.place.memberAlive(m.GetWho().GetAddress())
}

func (a *viewActor) drop(ctx actor.Context, sink *actor.PID) {
	key := sinkKey(sink)
	a.v.Unsubscribe(key)
	if _, ok := a.sinks[key]; ok {
		delete(a.sinks, key)
		ctx.Unwatch(sink)
	}
}

func (a *viewActor) apply(ctx actor.Context, res core.ViewResult) {
	now := time.Now()
	for _, g := range route(res.Deliveries, a.sinks) {
		if g.addr == ctx.Self().GetAddress() {
			a.env.fanout(g.presence, g.sinks)
			a.env.metrics.EventMessages.WithLabelValues("local").Inc()
		} else {
			sendFrom(ctx, actor.NewPID(g.addr, FanoutName), g.fanoutMsg())
			a.env.metrics.EventMessages.WithLabelValues("fanout").Inc()
		}
		a.env.metrics.Delivered.Add(float64(len(g.sinks)))
	}
	if res.Debounce != nil {
		a.debounce.arm(a.env.sched, res.Debounce.At.Sub(now), ctx.Self(), debounceFired{res.Debounce.Gen})
	}
	if res.Age != nil {
		a.age.arm(a.env.sched, res.Age.Sub(now), ctx.Self(), ageView{})
	}
	if res.Expiry != nil {
		a.expiry.arm(a.env.sched, res.Expiry.Sub(now), ctx.Self(), ageView{})
	}
	if res.Published {
		a.published(now)
	}
	if res.Unmeasured {
		a.unmeasured()
	}
	if res.Changed {
		a.changed(res)
	}
	a.hook(now)
	if a.v.Idle() {
		a.armIdle(ctx)
	} else {
		a.idleGen++
		a.idle.stop()
	}
}

// published records a published change: the last seen of an offline
// (handed to the store's writer, not waited for: a paused store must not
// stop the view), the metric, the dashboard's event and the debug log.
func (a *viewActor) published(now time.Time) {
	status := "offline"
	if a.v.Online {
		status = "online"
	} else if err := store.KeepLastSeen(context.Background(), a.env.history, a.user, a.v.LastSeen); err != nil {
		a.env.log.Debug("view: writing last seen", "user", a.user, "err", err)
	}
	a.env.metrics.Published.WithLabelValues(status).Inc()
	ev := &messages.ObsEvent{Kind: "published", User: a.user, Status: status}
	if !a.v.Online && !a.v.LastSeen.IsZero() {
		ev.LatencyMs = now.Sub(a.v.LastSeen).Milliseconds() // from the departure
		ev.Reason = a.mode
		if a.mode != "" {
			a.env.metrics.Detection.WithLabelValues(a.mode).Observe(now.Sub(a.v.LastSeen).Seconds())
		}
		if late := now.Sub(a.v.LastSeen) - a.env.timing.Debounce; a.mode == ModeClose && late > 0 {
			a.env.pushLate(late) // the push path is behind upstream of the fan-out (degrade.go)
		}
	}
	a.env.emit(ev)
	a.env.log.Debug("view: published", "user", a.user, "status", status, "devices", a.v.Devices.Len(), "unsettled", a.v.Unsettled)
}

// changed counts a new version published to subscribers, by kind: the
// denominator of the fan-out amplification (presence_changes_total).
func (a *viewActor) changed(res core.ViewResult) {
	kind := ChangeState
	if res.Published || res.Unmeasured {
		kind = ChangeStatus
	}
	a.env.metrics.Changes.WithLabelValues(kind).Inc()
}

// unmeasured records an offline this view told subscribers that saw the
// user online with no departure to measure it from (core.ViewResult): a
// view re-created after its node died with the device's gateway and lease.
// It is counted apart so that, with presence_offline_detection_seconds'
// count, every owner_crash offline is counted, and among the published
// offlines, which subscribers saw as one (docs/operations.md "Metrics").
func (a *viewActor) unmeasured() {
	a.env.metrics.Unmeasured.WithLabelValues(ModeOwnerCrash).Inc()
	a.env.metrics.Published.WithLabelValues("offline").Inc()
	a.env.emit(&messages.ObsEvent{Kind: "published", User: a.user, Status: "offline", Reason: ModeOwnerCrash + "_unmeasured"})
	a.env.log.Debug("view: published offline without a departure", "user", a.user, "subscribers", len(a.v.Subs))
}

// lastHeard is when the node that sent m last heard from the member it
// reports gone (zero: unknown).
func lastHeard(m *messages.GatewayDown) time.Time {
	if ms := m.GetLastHeardMs(); ms > 0 {
		return time.UnixMilli(ms)
	}
	return time.Time{}
}

// openedBefore is the new incarnation's start of a node m reports back
// under the same name (zero: m reports a failure or leave, all go).
func openedBefore(m *messages.GatewayDown) time.Time {
	if ms := m.GetOpenedBeforeMs(); ms > 0 {
		return time.UnixMilli(ms)
	}
	return time.Time{}
}

func (a *viewActor) armIdle(ctx actor.Context) {
	a.idleGen++
	a.idle.arm(a.env.sched, a.env.timing.Idle, ctx.Self(), idleCheck{a.idleGen})
}

// state is the user's raw state for lookups and routing: the derived
// status, and the devices ordered by deliverability (core.ByDeliverability).
func (a *viewActor) state() *messages.ViewState {
	now := time.Now()
	p := a.v.Presence(now)
	set := a.v.Status.Live(now)
	s := &messages.ViewState{User: a.user, Online: a.v.Online, Show: p.Show, Version: a.v.Version, Subscribers: uint32(len(a.v.Subs)), Settling: a.v.Uncertain(),
		StatusText: p.Text, UserShow: set.Show}
	if !a.v.LastSeen.IsZero() {
		s.LastSeenMs = a.v.LastSeen.UnixMilli()
	}
	if !p.IdleSince.IsZero() {
		s.IdleSinceMs = p.IdleSince.UnixMilli()
	}
	if !set.Until.IsZero() {
		s.ShowExpiresMs = set.Until.UnixMilli()
	}
	s.Foreground, s.Attended = core.Foreground(a.v.Devices.Holders())
	for dev, h := range a.v.Devices.Sorted() {
		s.Devices = append(s.Devices, &messages.DeviceState{Device: dev, Node: h.GetNode(), ConnId: h.GetConnId(), Epoch: h.GetEpoch(), SinceMs: h.Since.UnixMilli(),
			Platform: core.PlatformOf(h.Holder), Activity: core.ActivityOf(h.Holder), ActivityAtMs: h.GetActivityAtMs(), Dirty: h.GetDirty(), LastActiveMs: h.GetLastActiveMs()})
	}
	return s
}
