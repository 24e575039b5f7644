package webhook

// item is one change as an endpoint sends it: the event's JSON and what
// delivery needs to know of it without reading it again.
type item struct {
	User    string
	Version uint64
	AtMs    int64
	Online  bool
	Body    []byte // the Event, JSON
}

// backlog is one delivery worker's changes in memory, not yet sent: each
// user's in version order, the users in the order of their oldest change.
// Not safe for concurrent use: its endpoint's lock guards it.
type backlog struct {
	chains map[string][]item
	order  []string // the users with a chain, oldest first
	n      int      // items in chains
}

func newBacklog() *backlog { return &backlog{chains: map[string][]item{}} }

// add appends a change to its user's chain.
func (b *backlog) add(it item) {
	c, ok := b.chains[it.User]
	if !ok {
		b.order = append(b.order, it.User)
	}
	b.chains[it.User] = append(c, it)
	b.n++
}

// has reports whether the user has a change waiting.
func (b *backlog) has(user string) bool { return len(b.chains[user]) > 0 }

// replace puts it in place of every change of its user waiting (a user
// with one): the number of changes it replaced, coalesced into it.
func (b *backlog) replace(it item) int {
	c := b.chains[it.User]
	b.chains[it.User] = append(c[:0:0], it)
	b.n += 1 - len(c)
	return len(c)
}

// spill forgets the changes of the user waiting longest: the number of
// them (0: none waits). That user's row in the store holds its latest.
func (b *backlog) spill() int {
	if len(b.order) == 0 {
		return 0
	}
	u := b.order[0]
	b.order = b.order[1:]
	n := len(b.chains[u])
	delete(b.chains, u)
	b.n -= n
	return n
}

// take removes and returns up to limit changes: whole chains of the users
// waiting longest, and the start of the next one where it does not fit,
// so that each user's changes go out in version order.
func (b *backlog) take(limit int) []item {
	var out []item
	for len(b.order) > 0 && len(out) < limit {
		u := b.order[0]
		c := b.chains[u]
		k := min(len(c), limit-len(out))
		out = append(out, c[:k]...)
		b.n -= k
		if k < len(c) {
			b.chains[u] = c[k:]
			break
		}
		delete(b.chains, u)
		b.order = b.order[1:]
	}
	return out
}
