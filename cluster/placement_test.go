package cluster

import (
	"fmt"
	"testing"
	"time"

	pcluster "github.com/asynkron/protoactor-go/cluster"
)

func topology(at time.Time, ids ...int) placement {
	var ms []*pcluster.Member
	for _, i := range ids {
		ms = append(ms, &pcluster.Member{Id: fmt.Sprint("m", i), Host: "127.0.0.1", Port: int32(9000 + i), Kinds: []string{"view"}})
	}
	return placement{at: at, rdv: rendezvousOf(ms)}
}

// After a member's death only the identities it owned moved; after a join
// only those the newcomer took; a member that started a new cluster moved
// nothing; one that joined others owns only moved identities.
func TestMoved(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	since := t0.Add(10 * time.Second) // the settle window starts
	before, after := topology(t0, 1, 2, 3), topology(since.Add(time.Second), 1, 2)
	count := func(ps []placement, joined bool, since time.Time) (movedN, total int) {
		for i := range 300 {
			if moved(ps, joined, "view", fmt.Sprint("user-", i), since) {
				movedN++
			}
			total++
		}
		return movedN, total
	}
	// exactly checks each identity against the two placements' owners.
	exactly := func(what string, from, to placement) {
		n := 0
		for i := range 300 {
			id := fmt.Sprint("user-", i)
			want := from.rdv.Owner("view", id) != to.rdv.Owner("view", id)
			if got := moved([]placement{from, to}, false, "view", id, since); got != want {
				t.Fatalf("%s: %s moved %v, want %v", what, id, got, want)
			}
			if want {
				n++
			}
		}
		if n == 0 || n == 300 {
			t.Fatalf("%s: %d of 300 moved: the test shows nothing", what, n)
		}
	}
	exactly("m3 died", before, after)
	// The death was before the window: nothing moved since.
	if n, _ := count([]placement{before, after}, false, since.Add(2*time.Second)); n != 0 {
		t.Fatalf("a change before the window: %d moved", n)
	}
	exactly("m4 joined", before, topology(since.Add(time.Second), 1, 2, 3, 4))
	if n, _ := count([]placement{topology(since.Add(time.Second), 1)}, false, since); n != 0 {
		t.Fatalf("a new cluster: %d moved", n)
	}
	if n, total := count([]placement{topology(since.Add(time.Second), 1, 2)}, true, since); n != total {
		t.Fatalf("joined others: %d of %d moved, want all", n, total)
	}
	// More changes than kept: every identity may have moved.
	many := make([]placement, maxPlacements)
	for i := range many {
		many[i] = topology(since.Add(time.Duration(i)*time.Millisecond), 1, 2)
	}
	if n, total := count(many, false, since); n != total {
		t.Fatalf("forgotten changes: %d of %d moved, want all", n, total)
	}
}
