package cluster

import (
	"fmt"
	"testing"
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
