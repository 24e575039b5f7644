package webhook

import (
	"slices"
	"testing"
)

func versionsOf(its []item) []uint64 {
	var out []uint64
	for _, it := range its {
		out = append(out, it.Version)
	}
	return out
}

// A backlog gives each user's changes in order, the users waiting longest
// first, and splits a chain where a batch ends; replace and spill count
// what they took out.
func TestBacklog(t *testing.T) {
	b := newBacklog()
	for i, u := range []string{"a", "b", "a", "c", "a", "b"} {
		b.add(item{User: u, Version: uint64(i + 1)})
	}
	if got := versionsOf(b.take(2)); !slices.Equal(got, []uint64{1, 3}) || b.n != 4 {
		t.Fatalf("take 2: %v (n %d), want a's first two", got, b.n)
	}
	if got := versionsOf(b.take(3)); !slices.Equal(got, []uint64{5, 2, 6}) || b.n != 1 {
		t.Fatalf("take 3: %v (n %d), want a's last, then b's", got, b.n)
	}
	b.add(item{User: "c", Version: 7})
	b.add(item{User: "c", Version: 8})
	if n := b.replace(item{User: "c", Version: 9}); n != 3 || b.n != 1 || !b.has("c") {
		t.Fatalf("replace: %d replaced, n %d", n, b.n)
	}
	b.add(item{User: "d", Version: 10})
	if n := b.spill(); n != 1 || b.has("c") || b.n != 1 {
		t.Fatalf("spill: %d, c still there %v, n %d", n, b.has("c"), b.n)
	}
	if got := versionsOf(b.take(10)); !slices.Equal(got, []uint64{10}) || b.n != 0 || len(b.chains) != 0 || len(b.order) != 0 {
		t.Fatalf("take the rest: %v, left %d %v %v", got, b.n, b.chains, b.order)
	}
	if b.spill() != 0 || len(b.take(5)) != 0 {
		t.Fatal("an empty backlog gave something")
	}
}
