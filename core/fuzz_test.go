package core_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/presence-im/presence/core"
	"github.com/presence-im/presence/messages"
)

// refLease is a naive reference of a lease, written from the documented
// rules rather than from the code: it remembers every epoch that ended for
// good (any reason but expiry) instead of only the last one.
type refLease struct {
	holder     *messages.Holder
	floor      uint64
	renewedAt  time.Time
	ttl        time.Duration
	timer      core.Timer // the last armed expiry timer
	timerValid bool       // it has not been cancelled by the lease ending
	dead       map[uint64]bool
	ended      bool    // the last holder's lease ended (core's Lease.Ended)
	expired    *uint64 // the epoch whose lease expired last, while no other took it
	rejected   uint64
}

// mayHold: a connection may hold the lease without a handshake when its
// epoch is at least the floor, above the current holder's, and never ended
// for a reason other than expiry.
func (r *refLease) mayHold(h *messages.Holder) bool {
	e := h.GetEpoch()
	return e >= r.floor && (r.holder == nil || e > r.holder.GetEpoch()) && !r.dead[e]
}

// expect is what the reference predicts for one operation.
type expect struct {
	err        error
	up, down   bool
	reason     messages.EndReason
	lastAlive  time.Time
	superseded *messages.Holder
	expiryAt   *time.Time
}

func (r *refLease) take(h *messages.Holder, now time.Time, ttl time.Duration) expect {
	e := expect{up: true, expiryAt: ptr(now.Add(ttl))}
	if r.holder != nil && r.holder.GetConnId() != h.GetConnId() {
		e.superseded = r.holder
	}
	r.holder, r.floor = h, max(r.floor, h.GetEpoch())
	r.renewedAt, r.ttl = now, ttl
	r.ended, r.expired = false, nil
	return e
}

func (r *refLease) end(reason messages.EndReason, lastAlive time.Time) expect {
	r.expired = nil
	if reason != messages.EndReason_lease_expired {
		r.dead[r.holder.GetEpoch()] = true
	} else {
		r.expired = ptr(r.holder.GetEpoch())
	}
	r.holder, r.timerValid = nil, false
	r.ended = true
	return expect{down: true, reason: reason, lastAlive: lastAlive}
}

func (r *refLease) refuse(err error) expect {
	r.rejected++
	return expect{err: err}
}

func ptr[T any](v T) *T { return &v }

var (
	fuzzTTLs    = []time.Duration{seedTTL, seedDebounce, time.Second, 0}
	fuzzReasons = []messages.EndReason{
		// end_reason_unspecified is left out: see
		// TestLeaseReleaseWithUnspecifiedReasonIsFinal.
		messages.EndReason_close, messages.EndReason_ping_timeout, messages.EndReason_lease_expired,
		messages.EndReason_gateway_down, messages.EndReason_superseded,
	}
)

// fuzzHolder decodes a holder from one byte: epoch 0-7 (bits 0-2), node g0
// or g1 (bit 3), and connection (bits 4-5) c<epoch>, a second connection
// c<epoch>x with the same epoch, or cz whatever the epoch.
func fuzzHolder(a byte) *messages.Holder {
	epoch := a & 7
	return hold(fuzzNodes[a>>3&1], fuzzConns[a>>4&3][epoch], uint64(epoch))
}

var (
	fuzzNodes = [2]string{"g0", "g1"}
	fuzzConns = [4][8]string{
		{"c0", "c1", "c2", "c3", "c4", "c5", "c6", "c7"},
		{"c0x", "c1x", "c2x", "c3x", "c4x", "c5x", "c6x", "c7x"},
		{"cz", "cz", "cz", "cz", "cz", "cz", "cz", "cz"},
		{"c0", "c1", "c2", "c3", "c4", "c5", "c6", "c7"},
	}
)

// FuzzLease applies a random sequence of operations, three bytes each
// (operation, argument, argument), to a core.Lease and to the reference, and
// checks that they agree and that the lease's invariants hold: the floor
// never decreases; a release with a non-current epoch never changes the
// holder; a lease ended by Expire is at least RenewedAt + TTL old; the
// holder's epoch is at most the floor.
func FuzzLease(f *testing.F) {
	f.Add([]byte{})
	// Acquire epoch 1, renew it, 60 s later close it.
	f.Add([]byte{0, 1, 0, 2, 0x81, 0, 6, 0, 60, 3, 0x81, 0})
	// Acquire, wait for the expiry timer, expire, revive with a renew.
	f.Add([]byte{0, 1, 0, 7, 0, 0, 4, 0, 0, 2, 1, 0})
	// E01: epoch 1 on g0, epoch 2 on g1, the close of epoch 1 arrives 30 s
	// late and is refused.
	f.Add([]byte{0, 1, 0, 0, 0x0a, 0, 6, 0, 30, 3, 1, 0, 7, 0, 0, 4, 0, 0})
	// Gateway down, renew from the reclaimed epoch, stale handshake.
	f.Add([]byte{0, 1, 0, 5, 0, 0, 2, 1, 0, 0, 1, 0, 1, 2, 0})
	// Re-register at the floor after expiry, then by a second connection.
	f.Add([]byte{0, 3, 1, 6, 0, 200, 4, 0, 0, 1, 3, 2, 1, 0x13, 0, 3, 0x93, 2})
	// One connection id across epochs: renew, then a newer epoch from it.
	f.Add([]byte{0, 0x21, 0, 2, 0x22, 0, 1, 0x23, 0, 2, 0x21, 0, 3, 0x23, 1})
	// Expire with stale and future generations and too early.
	f.Add([]byte{0, 1, 0, 4, 2, 0, 4, 3, 9, 6, 0, 10, 4, 0, 0, 2, 0x81, 1, 7, 0, 0, 4, 2, 0, 4, 1, 0})

	f.Fuzz(func(t *testing.T, data []byte) {
		l := &core.Lease{}
		ref := &refLease{dead: map[uint64]bool{}}
		now := t0
		var maxGen uint64
		var trace []func() string // formatted only on failure

		for i := 0; i+3 <= len(data) && i < 3*256; i += 3 {
			op, a, b := data[i]%8, data[i+1], data[i+2]
			h := fuzzHolder(a)
			if a&0x80 != 0 && ref.holder != nil { // aim at the current holder
				h = hold(ref.holder.GetNode(), ref.holder.GetConnId(), ref.holder.GetEpoch())
			}
			ttl := fuzzTTLs[int(b)%len(fuzzTTLs)]
			prevFloor, prevHolder := l.Floor, l.Holder

			var res core.LeaseResult
			var want expect
			acts := true // the operation may arm or end something
			switch op {
			case 0, 1: // handshake, re-register
				handshake := op == 0
				n := now
				trace = append(trace, func() string {
					return fmt.Sprintf("Acquire(%v, handshake %v, +%v, ttl %v)", h, handshake, n.Sub(t0), ttl)
				})
				res = l.Acquire(h, handshake, now, ttl)
				switch {
				case handshake && h.GetEpoch() <= ref.floor:
					want = ref.refuse(core.ErrStaleAttempt)
				case !handshake && ref.holder != nil && ref.holder.GetConnId() == h.GetConnId() && ref.holder.GetEpoch() == h.GetEpoch():
					// the holder re-registering is a renewal that announces it again
					ref.renewedAt, ref.ttl = now, ttl
					want = expect{up: true, expiryAt: ptr(now.Add(ttl))}
				case !handshake && !ref.mayHold(h):
					want = ref.refuse(core.ErrStaleEpoch)
				default:
					want = ref.take(h, now, ttl)
				}
			case 2:
				n := now
				trace = append(trace, func() string { return fmt.Sprintf("Renew(%v, +%v, ttl %v)", h, n.Sub(t0), ttl) })
				res = l.Renew(h, now, ttl)
				switch {
				case ref.holder != nil && ref.holder.GetConnId() == h.GetConnId() && ref.holder.GetEpoch() == h.GetEpoch():
					ref.renewedAt, ref.ttl = now, ttl
					want = expect{expiryAt: ptr(now.Add(ttl))}
				case !ref.mayHold(h):
					want = ref.refuse(core.ErrStaleEpoch)
				default:
					want = ref.take(h, now, ttl)
				}
			case 3:
				reason := fuzzReasons[int(b)%len(fuzzReasons)]
				lastAlive := now.Add(-time.Duration(b) * time.Second)
				trace = append(trace, func() string {
					return fmt.Sprintf("Release(%s, %d, %v, +%v)", h.GetConnId(), h.GetEpoch(), reason, lastAlive.Sub(t0))
				})
				res = l.Release(h.GetConnId(), h.GetEpoch(), reason, lastAlive)
				current := ref.holder != nil && ref.holder.GetConnId() == h.GetConnId() && ref.holder.GetEpoch() == h.GetEpoch()
				e := h.GetEpoch()
				if current {
					want = ref.end(reason, lastAlive)
				} else if ref.holder == nil && !ref.ended && e > 0 && e >= ref.floor {
					// a lease re-created empty still takes its newest release
					ref.expired = nil
					if reason != messages.EndReason_lease_expired {
						ref.dead[e] = true
					} else {
						ref.expired = ptr(e)
					}
					ref.floor, ref.ended = max(ref.floor, e), true
					want = expect{down: true, reason: reason, lastAlive: lastAlive}
				} else if ref.holder == nil && ref.ended && ref.expired != nil && e == *ref.expired {
					// its own release after the expiry: the epoch is over for
					// good, nothing to publish
					if reason != messages.EndReason_lease_expired {
						ref.dead[e], ref.expired = true, nil
					}
				} else {
					want = ref.refuse(core.ErrStaleEpoch)
				}
			case 4:
				gen := ref.timer.Gen
				switch b % 4 {
				case 1:
					gen = l.Gen
				case 2:
					gen--
				case 3:
					gen = uint64(a)
				}
				n := now
				trace = append(trace, func() string { return fmt.Sprintf("Expire(gen %d, +%v)", gen, n.Sub(t0)) })
				res = l.Expire(gen, now)
				if ref.timerValid && gen == ref.timer.Gen && ref.holder != nil && !now.Before(ref.renewedAt.Add(ref.ttl)) {
					want = ref.end(messages.EndReason_lease_expired, ref.renewedAt)
				}
			case 5:
				node := fuzzNodes[a&1]
				heard := now.Add(-time.Duration(b) * 100 * time.Millisecond) // the node last heard from
				trace = append(trace, func() string { return fmt.Sprintf("GatewayDown(%s, %v)", node, heard) })
				res = l.GatewayDown(node, heard)
				if ref.holder != nil && ref.holder.GetNode() == node {
					last := ref.renewedAt
					if heard.After(last) {
						last = heard
					}
					want = ref.end(messages.EndReason_gateway_down, last)
				}
			case 6:
				now = now.Add(time.Duration(b) * time.Second)
				n := now
				trace = append(trace, func() string { return fmt.Sprintf("advance to +%v", n.Sub(t0)) })
				acts = false
			case 7: // the pending expiry timer's time comes
				if ref.timerValid && ref.timer.At.After(now) {
					now = ref.timer.At
				}
				n := now
				trace = append(trace, func() string { return fmt.Sprintf("advance to the timer, +%v", n.Sub(t0)) })
				acts = false
			}
			fail := func(format string, args ...any) {
				t.Helper()
				t.Fatalf("after\n  %s\n"+format, append([]any{joinTrace(trace)}, args...)...)
			}

			// The operation's result against the reference.
			if acts {
				if !errors.Is(res.Err, want.err) || (res.Err == nil) != (want.err == nil) {
					fail("err = %v, want %v", res.Err, want.err)
				}
				if res.Up != want.up || res.Down != want.down {
					fail("up %v down %v, want %v %v", res.Up, res.Down, want.up, want.down)
				}
				if res.Down && (res.Reason != want.reason || !res.LastAlive.Equal(want.lastAlive)) {
					fail("down %v at %v, want %v at %v", res.Reason, res.LastAlive, want.reason, want.lastAlive)
				}
				if res.Superseded != want.superseded {
					fail("superseded %v, want %v", res.Superseded, want.superseded)
				}
				switch {
				case (res.Expiry == nil) != (want.expiryAt == nil):
					fail("expiry %+v, want at %v", res.Expiry, want.expiryAt)
				case res.Expiry != nil:
					if !res.Expiry.At.Equal(*want.expiryAt) || res.Expiry.Gen <= maxGen || res.Expiry.Gen != l.Gen {
						fail("expiry %+v, want at %v with a gen above %d equal to the lease's %d", res.Expiry, *want.expiryAt, maxGen, l.Gen)
					}
					ref.timer, ref.timerValid = *res.Expiry, true
				}
			}
			if l.Gen < maxGen {
				fail("gen went back from %d to %d", maxGen, l.Gen)
			}
			maxGen = max(maxGen, l.Gen)

			// The state against the reference.
			if l.Holder != ref.holder || l.Live() != (ref.holder != nil) {
				fail("holder %v (live %v), want %v", l.Holder, l.Live(), ref.holder)
			}
			if l.Floor != ref.floor || l.RejectedStale != ref.rejected {
				fail("floor %d rejected %d, want %d %d", l.Floor, l.RejectedStale, ref.floor, ref.rejected)
			}

			// The invariants.
			if l.Floor < prevFloor {
				fail("floor decreased from %d to %d", prevFloor, l.Floor)
			}
			if op == 3 && res.Err != nil && l.Holder != prevHolder {
				fail("a refused release changed the holder from %v to %v", prevHolder, l.Holder)
			}
			if op == 4 && res.Down && now.Before(l.RenewedAt.Add(ref.ttl)) {
				fail("expired at +%v, before last renewal +%v + TTL %v", now.Sub(t0), l.RenewedAt.Sub(t0), ref.ttl)
			}
			if l.Holder != nil {
				if l.Holder.GetEpoch() > l.Floor {
					fail("holder epoch %d above the floor %d", l.Holder.GetEpoch(), l.Floor)
				}
				if !l.ExpiresAt.Equal(l.RenewedAt.Add(ref.ttl)) || !l.RenewedAt.Equal(ref.renewedAt) {
					fail("renewed +%v expires +%v, want +%v and + TTL %v", l.RenewedAt.Sub(t0), l.ExpiresAt.Sub(t0), ref.renewedAt.Sub(t0), ref.ttl)
				}
			}
		}
	})
}

func joinTrace(trace []func() string) string {
	const keep = 40
	out := ""
	if len(trace) > keep {
		out = fmt.Sprintf("... %d earlier\n  ", len(trace)-keep)
		trace = trace[len(trace)-keep:]
	}
	for i, f := range trace {
		if i > 0 {
			out += "\n  "
		}
		out += f()
	}
	return out
}
