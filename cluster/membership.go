package cluster

import (
	"time"
)

// State of a member as the gossip layer sees it.
type State string

const (
	Alive State = "alive"
	Dead  State = "dead"
	Left  State = "left"
)

// Member is one node of the cluster.
type Member struct {
	ID        string    `json:"id"`
	Addresses []string  `json:"addresses"`
	State     State     `json:"state"`
	Since     time.Time `json:"since"`
}

// Membership is the set of members. Members is safe for concurrent use and
// never blocks on the network.
type Membership interface {
	Self() Member
	Members() []Member
}

// Roster is what a member's actors read of the membership (package
// actors): who owns an identity and whether it moved, which actor
// addresses belong to members gone, whether a death verdict is still in
// doubt or a member silent, and the members with what each said of
// itself. Provider is the gossip's; a test of a node alone fakes it with a
// plain struct. Its methods are safe for concurrent use and never block
// on the network.
type Roster interface {
	Membership
	// Owner is the actor address of the member that owns identity of
	// kind ("" while none is placed).
	Owner(kind, identity string) string
	// Moved reports whether identity of kind may have lived on another
	// member at some time since.
	Moved(kind, identity string, since time.Time) bool
	// Gone reports whether actor (a proto.actor remote address) belonged
	// to a member declared dead or left.
	Gone(actor string) bool
	// Doubt is how long a death verdict has waited to be confirmed by
	// enough members answering (0: none).
	Doubt() time.Duration
	// Silent reports whether a member not declared dead has given no sign
	// of life here for longer than the gossip takes to hear from a live
	// one: it may be dying, its verdict still to come.
	Silent() bool
	// Meta is what a member said of itself in the gossip.
	Meta(id string) (Meta, bool)
}
