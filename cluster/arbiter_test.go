package cluster

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/presence-im/presence/store"
)

func TestDecideArbiter(t *testing.T) {
	ttl := 2 * time.Second
	for _, tc := range []struct {
		name string
		base []Voter
		in   ArbiterInput
		want ArbiterCall
	}{
		{"all reached: no lease needed", voters("+n1", "+n2", "+n3"), ArbiterInput{}, ArbiterServe},
		{"3: the survivor of two at once holds it", voters("+n1", "n2", "n3"), ArbiterInput{State: ArbiterOurs}, ArbiterServe},
		{"3: the survivor, still waiting for the majority to go first", voters("+n1", "n2", "n3"), ArbiterInput{State: ArbiterNotAsked}, ArbiterWait},
		{"3: the majority holds it", voters("+n1", "+n2", "n3"), ArbiterInput{State: ArbiterOurs}, ArbiterServe},
		{"3: the minority finds the holder renewing beyond reach", voters("n1", "n2", "+n3"), ArbiterInput{State: ArbiterTheirs, HolderAlive: true}, ArbiterFence},
		{"3: a crashed holder's lease has not run out yet", voters("+n1", "n2", "n3"), ArbiterInput{State: ArbiterTheirs, TheirsFor: ttl}, ArbiterWait},
		{"3: theirs for longer than twice its ttl", voters("+n1", "n2", "n3"), ArbiterInput{State: ArbiterTheirs, TheirsFor: 2*ttl + 1}, ArbiterFence},
		{"3: even a majority fences for a live holder", voters("+n1", "+n2", "n3"), ArbiterInput{State: ArbiterTheirs, HolderAlive: true}, ArbiterFence},
		{"3: store down, the majority serves", voters("+n1", "+n2", "n3"), ArbiterInput{State: ArbiterUnknown}, ArbiterServe},
		{"3: store down, the survivor fences", voters("+n1", "n2", "n3"), ArbiterInput{State: ArbiterUnknown}, ArbiterFence},
		{"2: store down, the oldest wins the tie", voters("+n1", "n2"), ArbiterInput{State: ArbiterUnknown}, ArbiterServe},
		{"2: store down, the younger fences", voters("n1", "+n2"), ArbiterInput{State: ArbiterUnknown}, ArbiterFence},
		{"2: the younger holds it", voters("n1", "+n2"), ArbiterInput{State: ArbiterOurs}, ArbiterServe},
		{"5: 2+2+1, the single one holds it", voters("n1", "n2", "n3", "n4", "+n5"), ArbiterInput{State: ArbiterOurs}, ArbiterServe},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.in.Verdict, tc.in.TTL = Decide(tc.base), ttl
			if got := DecideArbiter(tc.in); got != tc.want {
				t.Fatalf("DecideArbiter(%+v) = %v, want %v", tc.in, got, tc.want)
			}
		})
	}
}

// downStore is a store that does not answer.
type downStore struct{}

func (downStore) TakeArbiter(context.Context, string, string, time.Time, time.Duration) (store.Arbiter, error) {
	return store.Arbiter{}, errors.New("connection refused")
}

func (downStore) ArbiterClock(context.Context) (time.Time, error) {
	return time.Time{}, errors.New("connection refused")
}

func arbiter(s store.ArbiterStore, holder string) *Arbiter {
	return &Arbiter{Store: s, Holder: holder, TTL: 2 * time.Second, Delay: 500 * time.Millisecond}
}

// A 2+1 split: the majority takes the lease at once, the minority asks only
// after its delay, finds it renewed beyond its reach and fences.
func TestArbiterSplit(t *testing.T) {
	s := store.NewMemoryArbiters()
	n1, n3 := arbiter(s, "n1"), arbiter(s, "n3")
	t0 := time.UnixMilli(1_700_000_000_000)
	maj, min3 := voters("+n1", "+n2", "n3"), voters("n1", "n2", "+n3")
	if call, _ := n3.Decide(t0, Decide(min3), min3, false); call != ArbiterWait {
		t.Fatalf("minority before its delay: %v, want wait (not asked)", call)
	}
	if call, why := n1.Decide(t0, Decide(maj), maj, false); call != ArbiterServe || n1.row.Holder != "n1" {
		t.Fatalf("majority: %v (%s), want serve holding the lease", call, why)
	}
	t1 := t0.Add(600 * time.Millisecond)
	if call, _ := n3.Decide(t1, Decide(min3), min3, false); call != ArbiterWait {
		t.Fatalf("minority, first look: %v, want wait (n1 may have crashed)", call)
	}
	t2 := t0.Add(time.Second) // n1 renews (every ttl/4), n3 looks again
	n1.Decide(t2, Decide(maj), maj, false)
	if call, why := n3.Decide(t2.Add(100*time.Millisecond), Decide(min3), min3, false); call != ArbiterFence {
		t.Fatalf("minority after n1's renewal: %v (%s), want fence", call, why)
	}
}

// A node cut off 2+1 at its first death verdict still counts a majority
// (n1 dead, n2 not yet); in doubt of that verdict it asks only after its
// delay, so the real majority, whose verdict the others confirm at once,
// takes the lease first and the cut-off node fences.
func TestArbiterInDoubtLetsTheMajorityFirst(t *testing.T) {
	s := store.NewMemoryArbiters()
	n1, n3 := arbiter(s, "n1"), arbiter(s, "n3")
	t0 := time.UnixMilli(1_700_000_000_000)
	cut, maj := voters("n1", "+n2", "+n3"), voters("+n1", "+n2", "n3")
	if call, _ := n3.Decide(t0, Decide(cut), cut, true); call != ArbiterWait || n3.state != ArbiterNotAsked {
		t.Fatalf("cut-off node in doubt: %v, state %v, want wait without asking", call, n3.state)
	}
	if call, _ := n1.Decide(t0, Decide(maj), maj, true); call != ArbiterWait {
		t.Fatalf("majority during its ping round: %v, want wait", call)
	}
	if call, why := n1.Decide(t0.Add(100*time.Millisecond), Decide(maj), maj, false); call != ArbiterServe || n1.row.Holder != "n1" {
		t.Fatalf("majority once confirmed: %v (%s), want serve holding the lease at once", call, why)
	}
	if call, why := n3.Decide(t0.Add(600*time.Millisecond), Decide(cut), cut, true); call != ArbiterFence {
		t.Fatalf("cut-off node after its delay: %v (%s), want fence (n1 took the lease after n3 lost it)", call, why)
	}
}

// Two crashes at once: the survivor takes the free lease after its delay;
// with a crashed holder's lease it waits for it to run out, then takes it.
func TestArbiterSurvivor(t *testing.T) {
	s := store.NewMemoryArbiters()
	t0 := time.UnixMilli(1_700_000_000_000)
	if _, err := s.TakeArbiter(context.Background(), ArbiterName, "n2", t0.Add(-100*time.Millisecond), 2*time.Second); err != nil {
		t.Fatal(err)
	}
	a := arbiter(s, "n1")
	base := voters("+n1", "n2", "n3")
	var call ArbiterCall
	for at := t0; at.Before(t0.Add(5 * time.Second)); at = at.Add(100 * time.Millisecond) {
		if call, _ = a.Decide(at, Decide(base), base, false); call == ArbiterFence {
			t.Fatalf("fenced at +%v for a dead holder's lease", at.Sub(t0))
		}
		if call == ArbiterServe && at.Before(t0.Add(1900*time.Millisecond)) {
			t.Fatalf("took n2's lease at +%v, before it ran out", at.Sub(t0))
		}
	}
	if call != ArbiterServe || a.row.Holder != "n1" || a.row.Token != 2 {
		t.Fatalf("survivor: %v, lease %+v, want serve holding it with token 2", call, a.row)
	}
	// the dead leave the base: every member reached, the lease left alone
	exp := a.row.Expiry
	alone := voters("+n1")
	if call, _ := a.Decide(t0.Add(10*time.Second), Decide(alone), alone, false); call != ArbiterServe || a.state != ArbiterNotAsked {
		t.Fatalf("alone: %v state %v, want serve without the lease", call, a.state)
	}
	if l, _ := s.TakeArbiter(context.Background(), ArbiterName, "n9", t0, time.Second); !l.Expiry.Equal(exp) {
		t.Fatalf("the lease was renewed with nobody unreachable: %+v", l)
	}
}

// The store down during a split: the majority rule decides.
func TestArbiterStoreDown(t *testing.T) {
	t0 := time.UnixMilli(1_700_000_000_000)
	for _, tc := range []struct {
		base []Voter
		want ArbiterCall
	}{
		{voters("+n1", "+n2", "n3"), ArbiterServe},
		{voters("+n1", "n2", "n3"), ArbiterFence},
		{voters("+n1", "n2"), ArbiterServe},
	} {
		a := arbiter(downStore{}, "n1")
		call, why := a.Decide(t0.Add(time.Second), Decide(tc.base), tc.base, false)
		if call == ArbiterWait { // a minority's delay
			call, why = a.Decide(t0.Add(2*time.Second), Decide(tc.base), tc.base, false)
		}
		if call != tc.want || a.state != ArbiterUnknown {
			t.Fatalf("%v: %v (%s), want %v by the majority rule", tc.base, call, why, tc.want)
		}
	}
}

// FenceWatch tells the doubt (doubt.go) who holds the lease its side
// serves on, once the side serves on it; nobody once every member is
// reached again (the lease is not consulted then).
func TestFenceWatchTellsTheDoubtTheLeaseHolder(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_000)
	g := members(now, map[string]State{"n2": Dead, "n3": Dead}, nil)
	w := FenceWatch{Gossip: g, Preset: "fast", Stable: time.Hour, Arbiter: arbiter(store.NewMemoryArbiters(), "n1")}
	holder := func() string {
		if h := g.doubt.holder.Load(); h != nil {
			return *h
		}
		return ""
	}
	at := now
	for ; at.Before(now.Add(2*time.Second)) && holder() == ""; at = at.Add(100 * time.Millisecond) {
		if reason, why, _ := w.check(at, at.Add(-100*time.Millisecond)); reason != "" {
			t.Fatalf("fenced at +%v: %s %s", at.Sub(now), reason, why)
		}
		if at.Before(now.Add(w.Arbiter.Delay)) && holder() != "" {
			t.Fatalf("told of a lease at +%v, before the side below half asked for it", at.Sub(now))
		}
	}
	if holder() != "n1" {
		t.Fatalf("serving on its lease 2 s on: the doubt was told %q, want n1", holder())
	}
	for _, id := range []string{"n2", "n3"} {
		m := g.members[id]
		m.State = Alive
		g.members[id] = m
	}
	w.check(at, at.Add(-100*time.Millisecond))
	if holder() != "" {
		t.Fatalf("every member reached: the doubt still told of %q", holder())
	}
}

// FenceWatch tells the lease strategy when the gossip is in doubt of a
// verdict: reaching 2 of 3 but in doubt, it does not ask before the delay;
// once the verdict is confirmed, it asks at once.
func TestFenceWatchAsksForTheLeaseLaterInDoubt(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_000)
	g := members(now, map[string]State{"n2": Dead, "n3": Alive}, nil)
	g.doubt.since.Store(1) // in doubt since the gossip's start
	w := FenceWatch{Gossip: g, Preset: "fast", Stable: time.Hour, Arbiter: arbiter(store.NewMemoryArbiters(), "n1")}
	if reason, why, _ := w.check(now, now.Add(-100*time.Millisecond)); reason != "" || w.Arbiter.state != ArbiterNotAsked {
		t.Fatalf("in doubt: fence %q (%s), lease state %v, want no fence and the lease not asked", reason, why, w.Arbiter.state)
	}
	g.doubt.since.Store(0) // confirmed: n3 answered
	if reason, why, _ := w.check(now.Add(100*time.Millisecond), now); reason != "" || w.Arbiter.state != ArbiterOurs {
		t.Fatalf("confirmed: fence %q (%s), lease state %v, want the lease taken at once", reason, why, w.Arbiter.state)
	}
}

// skewedRun plays a 2+1 split for three TTLs in steps of 100 ms of true
// time: n1 and n2 on the majority side, n3 cut off; n1's clock is
// off1 and n3's off3 from the store's. It returns what each side
// decided last, every holder either found the lease with, and the log.
func skewedRun(t *testing.T, off1, off3 time.Duration) (call1, call3 ArbiterCall, holders map[string]bool, log string) {
	t.Helper()
	var out bytes.Buffer
	truth := time.UnixMilli(1_700_000_000_000)
	s := store.NewMemoryArbiters()
	s.Clock = func() time.Time { return truth }
	n1, n3 := arbiter(s, "n1"), arbiter(s, "n3")
	n1.Clock = func() time.Time { return truth.Add(off1) }
	n3.Clock = func() time.Time { return truth.Add(off3) }
	n1.Log, n3.Log = slog.New(slog.NewTextHandler(&out, nil)), slog.New(slog.NewTextHandler(&out, nil))
	maj, cut := voters("+n1", "+n2", "n3"), voters("n1", "n2", "+n3")
	holders = map[string]bool{}
	end := truth.Add(3 * n1.TTL)
	for ; truth.Before(end); truth = truth.Add(100 * time.Millisecond) {
		call1, _ = n1.Decide(n1.Clock(), Decide(maj), maj, false)
		call3, _ = n3.Decide(n3.Clock(), Decide(cut), cut, false)
		for _, l := range []store.Arbiter{n1.row, n3.row} { // the lease as each last found it
			if l.Holder != "" {
				holders[l.Holder] = true
			}
		}
	}
	return call1, call3, holders, out.String()
}

// The lease's expiry is written with the taker's clock. Within
// MaxClockSkew either way, a split goes as with true clocks: the majority
// holds the lease throughout, the cut-off node fences. Past it, the
// skewed node warns once and leaves the lease alone (it fences): a
// cut-off node whose clock runs ahead by more than the holder's renewal
// margin would otherwise find the live holder's lease run out and take it
// (with the check taken out it does, and n1 fences); a skewed majority
// fences and the cut-off node, after its delay, takes the free lease and
// serves alone.
func TestArbiterClockSkew(t *testing.T) {
	limit := MaxClockSkew(2 * time.Second)
	for _, off := range []time.Duration{0, limit * 9 / 10, -limit * 9 / 10} {
		call1, call3, holders, log := skewedRun(t, -off, off)
		if call1 != ArbiterServe || call3 != ArbiterFence || len(holders) != 1 || !holders["n1"] {
			t.Fatalf("clocks %v apart: n1 %v, n3 %v, holders %v, want n1 serving with the lease throughout, n3 fenced\n%s", 2*off, call1, call3, holders, log)
		}
	}
	call1, call3, holders, log := skewedRun(t, 0, 2200*time.Millisecond)
	if call1 != ArbiterServe || call3 != ArbiterFence || holders["n3"] || strings.Count(log, "clock is off") != 1 {
		t.Fatalf("n3 2.2 s ahead: n1 %v, n3 %v, holders %v, want n1 serving, n3 fenced without the lease, one warning\n%s", call1, call3, holders, log)
	}
	call1, call3, holders, log = skewedRun(t, -1500*time.Millisecond, 0)
	if call1 != ArbiterFence || call3 != ArbiterServe || holders["n1"] || !holders["n3"] || strings.Count(log, "clock is off") != 1 {
		t.Fatalf("n1 1.5 s behind: n1 %v, n3 %v, holders %v, want n1 fenced without the lease, n3 serving with it, one warning\n%s", call1, call3, holders, log)
	}
}
