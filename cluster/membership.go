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
