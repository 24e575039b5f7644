package cluster

import (
	"time"
)

// placement is one topology handed to proto.actor, with when.
type placement struct {
	at  time.Time
	rdv *Rendezvous
}

// maxPlacements bounds the topologies kept for Moved: more changes than
// this within one settle window count as a move for every identity.
const maxPlacements = 16

// Moved reports whether identity of kind may have lived on another member
// at some time since: its owner by rendezvous hashing under a topology in
// force since then differs from its owner now; or this member joined others
// since then (everything it owns was someone else's). A member that started
// a new cluster moved nothing.
//
// Joining counts from when the others may first place on this member
// (GossipConfig.Serving), not from when StartMember returns: a fenced
// incarnation is placed on as soon as it tells the others it serves, and
// its gossip's start may be seconds earlier. Until the join's outcome is
// known (StartMember still running), it counts as joined.
func (p *Provider) Moved(kind, identity string, since time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	joined := !p.serving.IsZero() && p.serving.After(since) && (p.g == nil || p.g.joined)
	return moved(p.placements, joined, kind, identity, since)
}

func moved(ps []placement, joined bool, kind, identity string, since time.Time) bool {
	if joined {
		return true
	}
	if len(ps) == 0 {
		return false
	}
	owner := ps[len(ps)-1].rdv.Owner(kind, identity)
	for i := len(ps) - 1; i >= 0; i-- {
		if o := ps[i].rdv.Owner(kind, identity); o != "" && o != owner {
			return true
		}
		if ps[i].at.Before(since) { // the one in force at since
			return false
		}
	}
	return len(ps) == maxPlacements // older changes were forgotten
}
