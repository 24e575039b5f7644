package cluster

import (
	"net"
	"strconv"

	pcluster "github.com/asynkron/protoactor-go/cluster"
)

// Rendezvous is where proto.actor puts a virtual actor: rendezvous hashing
// of its identity over the actor addresses of the members that host its
// kind. Provider.Owner uses it over the members it hands to proto.actor
// (every message a connection sends asks it); the chaos harness uses it
// over what the admin API lists, to know which node holds a user's view.
//
// It chooses exactly as proto.actor's cluster.Rendezvous does (FNV-1a 32 of
// the identity then the member's address, the highest score wins, members
// in proto.actor's order, ties to the first), TestRendezvousAsProtoActor
// checks it, but without that one's shared hasher lock and per-call slice:
// the identity is hashed once and each member costs only its address's
// bytes. Immutable once built, so safe for concurrent use.
type Rendezvous struct {
	kinds map[string][]string // kind -> member addresses, in proto.actor's order
}

// Placed is one member as Rendezvous sees it.
type Placed struct {
	Actor string   // proto.actor remote host:port
	Kinds []string // the kinds it hosts
}

// NewRendezvous places over members; one whose address does not parse is
// left out (proto.actor could not reach it either).
func NewRendezvous(members []Placed) *Rendezvous {
	var ms []*pcluster.Member
	for _, m := range members {
		if pm := placedMember(m.Actor, m.Actor, m.Kinds); pm != nil {
			ms = append(ms, pm)
		}
	}
	return rendezvousOf(ms)
}

// rendezvousOf places over proto.actor members, in the order proto.actor's
// own Rendezvous keeps them (ids descending).
func rendezvousOf(ms []*pcluster.Member) *Rendezvous {
	r := &Rendezvous{kinds: map[string][]string{}}
	for _, m := range pcluster.CopySortMembers(ms) {
		for _, k := range m.Kinds {
			r.kinds[k] = append(r.kinds[k], m.Address())
		}
	}
	return r
}

// placedMember is a proto.actor member at the actor address host:port, or
// nil if that does not parse.
func placedMember(id, actor string, kinds []string) *pcluster.Member {
	host, port, err := net.SplitHostPort(actor)
	if err != nil {
		return nil
	}
	n, _ := strconv.Atoi(port)
	return &pcluster.Member{Id: id, Host: host, Port: int32(n), Kinds: append([]string(nil), kinds...)}
}

// FNV-1a, 32 bits, as hash/fnv's New32a.
const (
	fnvOffset32 = 2166136261
	fnvPrime32  = 16777619
)

func fnvAdd(h uint32, s string) uint32 {
	for i := 0; i < len(s); i++ {
		h ^= uint32(s[i])
		h *= fnvPrime32
	}
	return h
}

// Owner is the actor address of the member that owns identity of kind;
// "" with no member (or no Rendezvous).
func (r *Rendezvous) Owner(kind, identity string) string {
	if r == nil {
		return ""
	}
	ms := r.kinds[kind]
	switch len(ms) {
	case 0:
		return ""
	case 1:
		return ms[0]
	}
	h := fnvAdd(fnvOffset32, identity)
	var best uint32
	owner := ""
	for _, addr := range ms {
		if s := fnvAdd(h, addr); s > best {
			best, owner = s, addr
		}
	}
	return owner
}
