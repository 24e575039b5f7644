package cluster

import (
	"net"
	"strconv"

	pcluster "github.com/asynkron/protoactor-go/cluster"
)

// Rendezvous is where proto.actor puts a virtual actor: rendezvous hashing
// of its identity over the actor addresses of the members that host its
// kind. Provider.Owner uses it over the members it hands to proto.actor;
// the chaos harness uses it over what the admin API lists, to know which
// node holds a user's view. Safe for concurrent use once built.
type Rendezvous struct{ rdv *pcluster.Rendezvous }

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
	rdv := pcluster.NewRendezvous()
	rdv.UpdateMembers(ms)
	return &Rendezvous{rdv: rdv}
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

// Owner is the actor address of the member that owns identity of kind;
// "" with no member (or no Rendezvous).
func (r *Rendezvous) Owner(kind, identity string) string {
	if r == nil || r.rdv == nil {
		return ""
	}
	return r.rdv.GetByClusterIdentity(pcluster.NewClusterIdentity(identity, kind))
}
