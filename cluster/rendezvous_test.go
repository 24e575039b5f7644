package cluster

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	pcluster "github.com/asynkron/protoactor-go/cluster"
)

// Rendezvous puts each identity on one member hosting its kind, the same
// one whatever the members' order, and moves only the identities of a
// member that leaves.
func TestRendezvous(t *testing.T) {
	if got := NewRendezvous(nil).Owner("view", "alice"); got != "" {
		t.Fatalf("owner with no member = %q, want \"\"", got)
	}
	a := Placed{Actor: "127.0.0.1:9001", Kinds: []string{"view", "lease"}}
	b := Placed{Actor: "127.0.0.1:9002", Kinds: []string{"view", "lease"}}
	c := Placed{Actor: "127.0.0.1:9003", Kinds: []string{"lease"}}
	bad := Placed{Actor: "no port", Kinds: []string{"view"}}
	all, reversed := NewRendezvous([]Placed{a, b, c, bad}), NewRendezvous([]Placed{c, b, a})
	without := NewRendezvous([]Placed{a, c})
	for i := range 200 {
		user := fmt.Sprintf("u%d", i)
		got := all.Owner("view", user)
		if got != a.Actor && got != b.Actor {
			t.Fatalf("view %s on %q: not a member hosting views", user, got)
		}
		if again := reversed.Owner("view", user); again != got {
			t.Fatalf("view %s on %q, and on %q with the members reversed", user, got, again)
		}
		if got == a.Actor && without.Owner("view", user) != a.Actor {
			t.Fatalf("view %s moved off %s when %s left", user, a.Actor, b.Actor)
		}
	}
}

// randomMembers is n members with random ids and ports on random
// loopback hosts, each hosting view, lease or both.
func randomMembers(rng *rand.Rand, n int) []*pcluster.Member {
	kinds := [][]string{{"view", "lease"}, {"view"}, {"lease"}, {"lease", "view"}}
	ms := make([]*pcluster.Member, n)
	for i := range ms {
		ms[i] = &pcluster.Member{Id: fmt.Sprintf("%x", rng.Uint64()), Host: fmt.Sprintf("127.0.%d.%d", rng.IntN(256), rng.IntN(256)),
			Port: int32(1024 + rng.IntN(60000)), Kinds: kinds[rng.IntN(len(kinds))]}
	}
	return ms
}

// Our Rendezvous puts every identity where proto.actor's own does (that is
// where proto.actor activates it), over random clusters of 1 to 200
// members (hashing the address before the identity fails it).
func TestRendezvousAsProtoActor(t *testing.T) {
	seed := time.Now().UnixNano()
	rng := rand.New(rand.NewPCG(uint64(seed), 1))
	t.Logf("seed %d", seed)
	for _, n := range []int{1, 2, 3, 5, 9, 50, 200} {
		ms := randomMembers(rng, n)
		theirs := pcluster.NewRendezvous()
		theirs.UpdateMembers(ms)
		ours := rendezvousOf(ms)
		for i := range 2000 {
			kind := []string{"view", "lease", "none"}[i%3]
			id := fmt.Sprintf("user-%d-%x", i, rng.Uint32())
			want := theirs.GetByClusterIdentity(pcluster.NewClusterIdentity(id, kind))
			if got := ours.Owner(kind, id); got != want {
				t.Fatalf("seed %d, %d members: %s/%s on %q, proto.actor places it on %q", seed, n, kind, id, got, want)
			}
		}
	}
}

// The owner of one identity at 3, 10, 50 and 200 members, ours against
// proto.actor's; make bench-micro runs it.
func BenchmarkRendezvousOwner(b *testing.B) {
	for _, n := range []int{3, 10, 50, 200} {
		ms := randomMembers(rand.New(rand.NewPCG(1, 2)), n)
		for i := range ms {
			ms[i].Kinds = []string{"view", "lease"}
		}
		ours := rendezvousOf(ms)
		theirs := pcluster.NewRendezvous()
		theirs.UpdateMembers(ms)
		ids := make([]string, 1024)
		for i := range ids {
			ids[i] = fmt.Sprintf("user-%06d", i)
		}
		b.Run(fmt.Sprintf("members=%d/ours", n), func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				ours.Owner("view", ids[i%len(ids)])
			}
		})
		b.Run(fmt.Sprintf("members=%d/protoactor", n), func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				theirs.GetByClusterIdentity(pcluster.NewClusterIdentity(ids[i%len(ids)], "view"))
			}
		})
	}
}

// When one of N members leaves, exactly the identities it owned move, and
// when one joins, exactly those it takes: about 1/N of them either way
// (issue 30's "share of views that move"), at 3 to 200 members.
func TestRendezvousMovesOneNth(t *testing.T) {
	ids := make([]string, 20000)
	for i := range ids {
		ids[i] = fmt.Sprintf("user-%06d", i)
	}
	for _, n := range []int{3, 10, 50, 200} {
		ms := randomMembers(rand.New(rand.NewPCG(uint64(n), 3)), n+1)
		for i := range ms {
			ms[i].Kinds = []string{"view"}
		}
		before, after := rendezvousOf(ms[:n]), rendezvousOf(ms) // ms[n] joins
		newcomer := ms[n].Address()
		moved := 0
		for _, id := range ids {
			was, is := before.Owner("view", id), after.Owner("view", id)
			if was != is && is != newcomer {
				t.Fatalf("%d members: %s moved from %s to %s, not to the newcomer", n, id, was, is)
			}
			if was != is {
				moved++
			}
		}
		share := float64(moved) / float64(len(ids))
		t.Logf("%d members, one joins: %.4f of the identities move (1/%d = %.4f)", n, share, n+1, 1/float64(n+1))
		if share < 0.5/float64(n+1) || share > 1.5/float64(n+1) {
			t.Errorf("%d members, one joins: %.4f moved, want about 1/%d", n, share, n+1)
		}
	}
}
