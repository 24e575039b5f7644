package core

import (
	"slices"
	"time"

	"github.com/presence-im/presence/messages"
)

// View is one user's published presence and its subscribers, owned by its
// viewActor. The user is online if any device is; the offline is
// published only Debounce after the last device left, and a device coming
// back inside that window publishes nothing (the debounce generation is
// bumped, so the pending timer fires into nothing).
type View struct {
	User     string
	Debounce time.Duration
	Policy   *Policy

	Devices  Devices   // live devices, their connection and since when
	Online   bool      // the published state
	LastSeen time.Time // last published departure
	// seenByOthers is LastSeen as others may know it (see Presence).
	seenByOthers time.Time
	// Status is what the user set (set_status); the show others see is
	// derived from it and the devices' activity (Derive).
	Status  UserStatus
	Version uint64 // of the last published change; grows strictly

	pending   bool      // an offline is waiting out the debounce
	pendingTo time.Time // when that debounce ends
	departure time.Time // when the last device was last alive
	Gen       uint64    // debounce timer generation

	Subs map[string]*Sub // by sink id

	// goneCounted: an offline published with no departure to measure it
	// from (ViewResult.Unmeasured) was already reported.
	goneCounted bool

	// Unsettled is set on a view that may replace one lost with a member,
	// until Settle: it takes a device-down for a device it never saw as a
	// departure (the lease is the authority for its epoch).
	Unsettled bool

	DeviceFlips    uint64 // device-level ups and downs
	PublishedFlips uint64 // user-level online/offline changes published

	// admitted are devices Admit let in that are not up yet, and until
	// when each holds its place (see admit.go).
	admitted map[string]time.Time

	// Unloaded: Policy and LastSeen are not read from the store yet (see
	// Load). Devices may come and go and departures are published (to no
	// one); whatever trims for a viewer (a subscribe, a lookup) must Load
	// first.
	Unloaded bool
}

// Device is one live device of a view: its connection and since when it has
// been up, one entry of its Devices rather than one per field.
type Device struct {
	*messages.Holder
	Since time.Time
}

// Sub is one subscriber of a view: the viewer it sees as, and the last
// presence it was sent (nil: nothing visible yet).
type Sub struct {
	Viewer string
	Last   *messages.Presence
}

// Delivery is one event for one subscriber sink.
type Delivery struct {
	Sink     string
	Presence *messages.Presence
}

// ViewResult is what a view operation asks its owner to do.
type ViewResult struct {
	Deliveries []Delivery
	Debounce   *Timer     // arm the debounce timer
	Age        *time.Time // re-trim at this time (coarse recently -> long_ago)
	Expiry     *time.Time // the user's status expires then (StatusExpired)
	Stale      bool       // the change was from an older connection and ignored
	Published  bool       // the user-level online/offline state changed
	// Changed is set when the view published a new version to its
	// subscribers (Published: of its online/offline state; else of the
	// rest: show, status text, activity, devices, a re-trim).
	Changed bool
	// Unmeasured is set by a Settle that told subscribers who saw the user
	// online that it is offline, with no departure known to measure the
	// latency from (see Settle).
	Unmeasured bool
}

// NewView makes an empty view; lastSeen comes from the history store.
func NewView(user string, debounce time.Duration, pol *Policy, lastSeen time.Time) *View {
	return &View{
		User: user, Debounce: debounce, Policy: pol, LastSeen: lastSeen, seenByOthers: lastSeen,
		Subs: map[string]*Sub{},
	}
}

// DeviceUp records a device's live connection, or a change of its
// declared state (the holder carries it: a lower state_gen of the same
// connection is older and ignored). Coming back inside the debounce
// window cancels the pending offline; a change of a user already online
// is published to those who see it differ.
func (v *View) DeviceUp(device string, h *messages.Holder, now time.Time) ViewResult {
	cur, ok := v.Devices.Get(device)
	if ok && (cur.GetEpoch() > h.GetEpoch() || cur.GetEpoch() == h.GetEpoch() && cur.GetStateGen() > h.GetStateGen()) {
		return ViewResult{Stale: true}
	}
	changed := !ok || !SameState(cur.Holder, h)
	if !ok {
		v.DeviceFlips++
		cur.Since = now
		if ms := h.GetSinceMs(); ms > 0 { // a re-register after a failover
			cur.Since = time.UnixMilli(ms)
		}
	}
	v.Devices.Set(device, Device{Holder: h, Since: cur.Since})
	v.unadmit(device)
	if v.pending {
		v.pending = false
		v.Gen++
	}
	if v.Online {
		if changed {
			return v.publish(now)
		}
		return ViewResult{}
	}
	v.Online = true
	return v.flip(now)
}

// DeviceDown removes a device if epoch is its current connection's. When the
// last device leaves, the offline waits out the debounce.
func (v *View) DeviceDown(device string, epoch uint64, lastAlive, now time.Time) ViewResult {
	cur, ok := v.Devices.Get(device)
	switch {
	case !ok && v.Unsettled && v.Devices.Len() == 0:
		// A device the lost incarnation knew; subscribers may think the
		// user online.
	case !ok || cur.GetEpoch() != epoch:
		return ViewResult{Stale: true}
	}
	v.Devices.Delete(device)
	v.DeviceFlips++
	if v.Devices.Len() > 0 && v.Online {
		return v.publish(now) // the platforms left, maybe the show
	}
	if v.Devices.Len() > 0 || !v.Online && !v.Unsettled {
		return ViewResult{}
	}
	v.departure = lastAlive
	// Even without a debounce the offline goes through the timer: the
	// actor decides when it fires (not while the node stalls, is in doubt
	// or fenced), and an unsettled view lets Settle decide.
	v.pending, v.pendingTo = true, now.Add(v.Debounce-DeliveryBudget(v.Debounce))
	v.Gen++
	return ViewResult{Debounce: &Timer{At: v.pendingTo, Gen: v.Gen}}
}

// DeliveryBudget is the part of the debounce kept for the offline to reach
// its subscribers: the view publishes debounce minus this after the
// departure reached it, so that the published bounds (graceful close <=
// debounce, ...) hold from the departure to the subscriber, with the hops
// before and after the view. A fifth of the debounce, at most 50 ms (seed:
// 50 ms of 20 s; fast: 40 ms of 200 ms): a tenth left the fast preset too
// little for the hops on a loaded machine (docs/bounds.md, "What the bounds
// include"). A device back within that last sliver of the debounce shows
// as a short flap.
func DeliveryBudget(debounce time.Duration) time.Duration {
	return min(debounce/5, 50*time.Millisecond)
}

// GatewayDown removes the devices connected through a dead node (its leases
// may have died with it, so nobody else will report them) and starts the
// offline if none is left. Each device departs at its last sign of life
// the view knows of: lastHeard, when this member last heard from the node
// (an acked probe; zero: unknown), or the device's coming up if later. The
// crash came after both, so the latency measured from it
// (presence_offline_detection_seconds) includes the failure detection and
// may overstate it by up to a probe round, never understate it. Unknown, it
// is now: only the debounce is counted.
func (v *View) GatewayDown(node string, lastHeard, now time.Time) ViewResult {
	return v.GatewayDownBefore(node, time.Time{}, lastHeard, now)
}

// GatewayDownBefore is GatewayDown for the connections the node opened
// before `before` only (zero: all of them): a node back under the same name
// as a new incarnation, started at `before`, keeps its new connections.
func (v *View) GatewayDownBefore(node string, before, lastHeard, now time.Time) ViewResult {
	var res ViewResult
	for device, h := range v.Devices.All() {
		if h.GetNode() != node || !OpenedBefore(h.Holder, before) {
			continue
		}
		last := now
		if !lastHeard.IsZero() {
			last = lastHeard
			if h.Since.After(last) {
				last = h.Since
			}
			if last.After(now) { // clocks of two members may differ
				last = now
			}
		}
		res = v.DeviceDown(device, h.GetEpoch(), last, now)
	}
	return res
}

// DebounceFired publishes the offline if gen is still the pending one.
func (v *View) DebounceFired(gen uint64, now time.Time) ViewResult {
	if !v.pending || gen != v.Gen || v.Devices.Len() > 0 || v.Unsettled {
		return ViewResult{} // an unsettled view lets Settle decide
	}
	return v.goOffline(now)
}

func (v *View) goOffline(now time.Time) ViewResult {
	v.pending = false
	v.Online = false
	if v.departure.After(v.LastSeen) {
		v.LastSeen = v.departure
	}
	if v.Status.Live(now).Show != messages.Show_invisible {
		v.seenByOthers = v.LastSeen
	}
	return v.flip(now)
}

// flip publishes a user-level online/offline change.
func (v *View) flip(now time.Time) ViewResult {
	v.PublishedFlips++
	v.goneCounted = !v.Online // an offline flip is measured from its departure
	res := v.publish(now)
	res.Published = true
	return res
}

// SetStatus sets what the user set (set_status). Statuses are ordered by
// their At, in milliseconds: a set as it happens always wins, and is
// stamped after the status it replaces whatever the clocks say; a replay
// (each live connection tells the newest it heard again after a failover)
// is taken only if none later is in place, so the newest wins. Show auto
// (or unspecified) clears the user's show: it is derived again.
// Subscribers see it while the user is online.
func (v *View) SetStatus(u UserStatus, replay bool, now time.Time) ViewResult {
	u.At = u.At.Truncate(time.Millisecond)
	if replay && u.At.Before(v.Status.At) {
		return ViewResult{}
	}
	if !replay && !u.At.After(v.Status.At) {
		u.At = v.Status.At.Add(time.Millisecond)
	}
	if u.Show == messages.Show_auto {
		u.Show = messages.Show_show_unspecified
	}
	if u.Show == v.Status.Show && u.Text == v.Status.Text && u.Until.Equal(v.Status.Until) {
		v.Status.At = u.At
		return ViewResult{} // nothing anyone sees changes
	}
	was := v.Status.Live(now).Show
	v.Status = u
	if is := u.Live(now).Show; is != was {
		v.invisibleTurned(was, is, now)
	}
	res := v.publish(now)
	if !u.Until.IsZero() && u.Until.After(now) {
		res.Expiry = &u.Until
	}
	return res
}

// SetShow sets the user's show alone, as set at now (SetStatus); an
// unspecified show changes nothing.
func (v *View) SetShow(show messages.Show, now time.Time) ViewResult {
	if show == messages.Show_show_unspecified {
		return ViewResult{}
	}
	return v.SetStatus(UserStatus{Show: show, At: now}, false, now)
}

// StatusExpired drops the user's status once its expiry passed and
// publishes what is derived again.
func (v *View) StatusExpired(now time.Time) ViewResult {
	if v.Status.Until.IsZero() || now.Before(v.Status.Until) {
		return ViewResult{}
	}
	was := v.Status.Show
	v.Status = UserStatus{At: v.Status.At}
	v.invisibleTurned(was, messages.Show_show_unspecified, now)
	return v.publish(now)
}

// invisibleTurned: going invisible while online looks to others like
// leaving now.
func (v *View) invisibleTurned(was, is messages.Show, now time.Time) {
	if is == messages.Show_invisible && was != messages.Show_invisible && v.Online {
		v.seenByOthers = now
	}
}

// SetPolicy applies a new policy to existing subscribers at once: a viewer
// that may no longer see the user gets nothing more (and is not told); one
// that now may gets the current presence.
func (v *View) SetPolicy(pol *Policy, now time.Time) ViewResult {
	v.Policy = pol
	return v.publish(now)
}

// Age re-trims for subscribers at now: a coarse "recently" becoming
// "long_ago" 24 h after the last departure, or the user's status expiring
// (StatusExpired).
func (v *View) Age(now time.Time) ViewResult {
	if !v.Status.Until.IsZero() && !now.Before(v.Status.Until) {
		return v.StatusExpired(now)
	}
	return v.publish(now)
}

// Subscribe registers sink as viewer and returns what viewer may see now
// (nil: nothing). Subscribing again replaces the registration.
func (v *View) Subscribe(sink, viewer string, now time.Time) (*messages.Presence, ViewResult) {
	p := v.Peek(viewer, now)
	v.Subs[sink] = &Sub{Viewer: viewer, Last: p}
	return p, ViewResult{Age: v.ageAt(now)}
}

// Peek returns what viewer may see of the user now, as a subscribe's
// snapshot does, registering nothing (a query); nil: nothing to see.
func (v *View) Peek(viewer string, now time.Time) *messages.Presence {
	p := v.trim(v.Presence(now), viewer, now)
	if p != nil && v.Uncertain() {
		// The user's devices may still be re-registering: unknown, never
		// offline; the state follows at Settle or with the first device.
		p = &messages.Presence{User: v.User, Status: messages.Status_unknown}
	}
	if p != nil {
		p.Version = v.Version
	}
	return p
}

// Uncertain reports whether the view cannot tell offline from not yet
// re-registered: unsettled and no device known.
func (v *View) Uncertain() bool { return v.Unsettled && v.Devices.Len() == 0 }

// Reattach registers a sink that subscribed to an earlier incarnation of
// this view (it moved to another node) without a snapshot. last is what the
// sink last passed on for this user (nil: nothing, so the sink is owed the
// next publish whatever it shows): the view sends only what differs from
// it, so a failover that changed nothing is invisible to subscribers.
//
// Versions go on from last's (clocks of two nodes may differ). A settled
// view sends the sink at once what differs: its re-attach came after Settle.
func (v *View) Reattach(sink, viewer string, last *messages.Presence, now time.Time) ViewResult {
	v.Subs[sink] = &Sub{Viewer: viewer, Last: last}
	v.Version = max(v.Version, last.GetVersion())
	if v.Unsettled {
		return ViewResult{}
	}
	return v.publishGone(now) // only sinks whose last presence differs get one
}

// Raise makes the view's next version above floor: a version told
// elsewhere for the user (the webhooks' receiver, by a node gone) that a
// view re-created with a lower one must not publish below.
func (v *View) Raise(floor uint64) { v.Version = max(v.Version, floor) }

// Settle publishes the current state to every sink that is owed one. A view
// re-created on another node calls it once every live device has had the
// time to re-register (see actors), so a device that did not is reported
// offline, and one that did was already reported online.
func (v *View) Settle(now time.Time) ViewResult {
	v.Unsettled = false
	if v.pending && v.Devices.Len() == 0 && !now.Before(v.pendingTo) {
		return v.goOffline(now) // the debounce already ran out
	}
	if v.pending {
		return ViewResult{} // the debounce timer will publish
	}
	return v.publishGone(now)
}

// publishGone publishes, and marks the result Unmeasured if it tells a
// sink last sent the user online that it no longer is: the user's offline,
// once per offline (a sink re-attaching later is told the same one).
func (v *View) publishGone(now time.Time) ViewResult {
	wasOnline := v.sinksOnline()
	res := v.publish(now)
	for _, d := range res.Deliveries {
		if wasOnline[d.Sink] && !v.Online && !v.goneCounted && d.Presence.GetStatus() != messages.Status_online {
			res.Unmeasured, v.goneCounted = true, true
		}
	}
	return res
}

// sinksOnline are the sinks last sent the user online. One that Settle
// tells offline saw the user leave, but a view re-created after its node
// died with the device's gateway and lease learns nothing of the device: no
// down, no last sign of life, so no departure to measure the latency from.
// A stand-in (the dead node's last gossip ack, the version of the last
// online) may fall after the real departure (a device that left inside the
// old view's debounce) and understate it: the offline is counted apart
// (docs/operations.md "Metrics").
func (v *View) sinksOnline() map[string]bool {
	on := map[string]bool{}
	for sink, s := range v.Subs {
		if s.Last.GetStatus() == messages.Status_online {
			on[sink] = true
		}
	}
	return on
}

// Unsubscribe is idempotent.
func (v *View) Unsubscribe(sink string) { delete(v.Subs, sink) }

// Presence is the untrimmed state at now, with the derived status.
func (v *View) Presence(now time.Time) Presence {
	holders := v.Devices.Holders()
	d := Derive(v.Status, holders, now)
	p := Presence{User: v.User, Online: v.Online, LastSeen: v.seenByOthers, Show: d.Show, OwnLastSeen: v.LastSeen, IdleSince: d.IdleSince, Text: d.Text}
	if len(holders) > 0 {
		p.Devices = Platforms(holders)
	}
	return p
}

// PendingUntil is when a pending offline publishes (its debounce ends), and
// whether one is pending.
func (v *View) PendingUntil() (time.Time, bool) { return v.pendingTo, v.pending }

// Idle reports whether nothing is live: no device, no subscriber, no
// pending offline. An idle view may passivate.
func (v *View) Idle() bool { return v.Devices.Len() == 0 && len(v.Subs) == 0 && !v.pending }

func (v *View) trim(p Presence, viewer string, now time.Time) *messages.Presence {
	g, ok := v.grant(viewer)
	if !ok {
		return nil
	}
	return Render(g, viewer == v.User, p, now)
}

// grant is Grant under the view's policy, which must have been loaded.
func (v *View) grant(viewer string) (Granularity, bool) {
	if v.Unloaded {
		panic("core: a view trimmed for " + viewer + " before its policy was loaded")
	}
	return Grant(v.Policy, viewer, v.User)
}

// NewUnloadedView is a view whose policy and last seen are read later
// (Load), once something needs them: a view activated by a device
// coming online has no subscriber to trim for, and what it publishes goes
// to no one until one subscribes, so a connect need not read the store.
func NewUnloadedView(user string, debounce time.Duration) *View {
	v := NewView(user, debounce, nil, time.Time{})
	v.Unloaded = true
	return v
}

// Load sets what the store holds for the user: its policy, and its last
// seen where that is later than any departure published since the view was
// made (the store keeps the latest, this view's own included). A later one
// is a departure from before this view, taken as NewView takes it; one not
// later is this view's own or older, and what others may know of it
// (an invisible user's) is already set.
func (v *View) Load(pol *Policy, lastSeen time.Time) {
	v.Policy, v.Unloaded = pol, false
	if lastSeen.After(v.LastSeen) {
		v.LastSeen = lastSeen
		if lastSeen.After(v.seenByOthers) {
			v.seenByOthers = lastSeen
		}
	}
}

// publish bumps the version and sends each subscriber its trimmed presence
// if that differs from the last one it was sent. The version is at least
// the wall time in milliseconds, so it keeps growing for a subscriber when
// the view is re-created empty on another node.
//
// Subscribers granted alike get one shared, read-only presence (at most one
// per granularity, and the user's own): one allocation per class, not per
// subscriber, and the fan-out groups the deliveries by that pointer
// (BENCHMARKS.md, one offline to 5,000).
func (v *View) publish(now time.Time) ViewResult {
	res := ViewResult{Changed: true}
	v.Version = max(v.Version+1, uint64(now.UnixMilli()))
	if len(v.Subs) == 0 {
		res.Age = v.ageAt(now)
		return res
	}
	state := v.Presence(now) // derived once for every subscriber
	var rendered renderings
	res.Deliveries = make([]Delivery, 0, len(v.Subs))
	for sink, s := range v.Subs {
		g, ok := v.grant(s.Viewer)
		if !ok {
			continue
		}
		p := rendered.get(g, s.Viewer == v.User, state, v.Version, now)
		if sameView(p, s.Last) {
			continue
		}
		s.Last = p
		res.Deliveries = append(res.Deliveries, Delivery{Sink: sink, Presence: p})
	}
	res.Age = v.ageAt(now)
	return res
}

// renderings are one publish's presences by granularity and self: a
// handful at most, so a slice searched in order.
type renderings []rendering

type rendering struct {
	g    Granularity
	self bool
	p    *messages.Presence
}

// get is the rendering of state for (g, self) at version, made at its
// first need.
func (r *renderings) get(g Granularity, self bool, state Presence, version uint64, now time.Time) *messages.Presence {
	for _, x := range *r {
		if x.g == g && x.self == self {
			return x.p
		}
	}
	p := Render(g, self, state, now)
	p.Version = version
	*r = append(*r, rendering{g, self, p})
	return p
}

// ageAt is when a coarse subscriber's "recently" turns into "long_ago", if
// that is still ahead and anyone is subscribed.
func (v *View) ageAt(now time.Time) *time.Time {
	if v.Online || v.LastSeen.IsZero() || len(v.Subs) == 0 {
		return nil
	}
	at := v.LastSeen.Add(RecentWindow + time.Minute)
	if !at.After(now) {
		return nil
	}
	return &at
}

// sameView compares two trimmed presences but for their versions.
func sameView(a, b *messages.Presence) bool {
	return b != nil && a.GetStatus() == b.GetStatus() && a.GetShow() == b.GetShow() &&
		a.GetLastSeenMinute() == b.GetLastSeenMinute() && a.GetIdleSinceMinute() == b.GetIdleSinceMinute() &&
		a.GetStatusText() == b.GetStatusText() && samePlatforms(a.GetDevices(), b.GetDevices())
}

func samePlatforms(a, b []*messages.DevicePresence) bool {
	return slices.EqualFunc(a, b, func(x, y *messages.DevicePresence) bool {
		return x.GetPlatform() == y.GetPlatform() && x.GetActivity() == y.GetActivity()
	})
}
