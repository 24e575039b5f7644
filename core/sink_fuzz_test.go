package core_test

import (
	"testing"

	"github.com/presence-im/presence/core"
	"github.com/presence-im/presence/messages"
)

// FuzzSinkBatched feeds one sequence of changes, two bytes each (target
// and status in the first, a version step in the second: 0 repeats the
// target's last version, 255 goes back one, else forward; a first byte
// with its top bit set is a window's end instead), to a realtime and a
// batched sink subscribed to the same three targets. After the last
// window, what the batched stream shows last per target must be what the
// realtime stream does (versions aside), each stream's versions must grow
// strictly, and the batched one may never send more presences.
func FuzzSinkBatched(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0x01, 1, 0x00, 1, 0x80, 0})                              // alice flaps within a window
	f.Add([]byte{0x01, 1, 0x80, 0, 0x00, 1, 0x80, 0})                     // across two windows
	f.Add([]byte{0x01, 2, 0x00, 255, 0x11, 1, 0x21, 1, 0x20, 0, 0x80, 0}) // a late older change, three targets
	f.Fuzz(func(t *testing.T, data []byte) {
		targets := []string{"alice", "bob", "carol"}
		statuses := []messages.Status{messages.Status_online, messages.Status_offline, messages.Status_unknown}
		rt, bt := core.NewSink(), core.NewSink()
		var snap []*messages.Presence
		for _, u := range targets {
			snap = append(snap, state(u, 10, messages.Status_online))
		}
		subscribed(t, rt, "s", messages.Tier_realtime, snap...)
		subscribed(t, bt, "s", messages.Tier_batched, snap...)
		version := map[string]uint64{"alice": 10, "bob": 10, "carol": 10}
		lastRT, lastBT := map[string]*messages.Presence{}, map[string]*messages.Presence{}
		sentRT, sentBT := 0, 0
		take := func(last map[string]*messages.Presence, p *messages.Presence, sent *int) {
			if l := last[p.GetUser()]; l != nil && p.GetVersion() <= l.GetVersion() {
				t.Fatalf("%s: version %d after %d", p.GetUser(), p.GetVersion(), l.GetVersion())
			}
			last[p.GetUser()] = p
			*sent++
		}
		flush := func() {
			for _, fr := range bt.Flush() {
				for _, p := range fr.GetPresenceBatch().GetPresences() {
					take(lastBT, p, &sentBT)
				}
			}
		}
		for i := 0; i+1 < len(data); i += 2 {
			if data[i]&0x80 != 0 {
				flush()
				continue
			}
			u := targets[int(data[i]>>4)%len(targets)]
			switch step := data[i+1]; step {
			case 0:
			case 255:
				version[u]--
			default:
				version[u] += uint64(step)
			}
			p := state(u, version[u], statuses[int(data[i]&0x0f)%len(statuses)])
			for _, fr := range rt.Event(p) {
				take(lastRT, fr.GetPresence(), &sentRT)
			}
			if fs := bt.Event(p); fs != nil {
				t.Fatalf("a batched change was sent before its window's end: %v", fs)
			}
		}
		flush()
		for i, u := range targets {
			want, got := lastRT[u], lastBT[u]
			if want == nil {
				want = snap[i]
			}
			if got == nil {
				got = snap[i]
			}
			if !core.SamePresence(want, got) {
				t.Fatalf("%s: realtime ends at %v, batched at %v", u, want, got)
			}
		}
		if sentBT > sentRT {
			t.Fatalf("batched sent %d presences, realtime %d", sentBT, sentRT)
		}
	})
}
