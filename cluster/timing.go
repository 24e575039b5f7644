package cluster

import (
	"time"

	"github.com/presence-im/presence/config"
)

// BoundMembers is the cluster size the published bounds hold for: failure
// detection grows with log10 of the members.
const BoundMembers = 100

// Timings derives, in this one place, the timings a gossip member adds to
// its preset, and returns them with the propagation:
//
//	FailureDetection = FailureDetection(preset, BoundMembers)
//	Propagation      = Propagation(preset)
//	Settle           = 2 x Propagation + Renew / 2 + Check
//
// A re-created view settles once every connection re-registered: they wait
// for the change to reach every member (a propagation), then spread over
// Renew / 2; the view itself may have started a propagation early, and the
// last re-register is read at the next check.
func Timings(preset string, t config.Timing) (config.Timing, time.Duration) {
	prop := Propagation(preset)
	t.FailureDetection = FailureDetection(preset, BoundMembers)
	t.Settle = 2*prop + t.Renew/2 + t.Check
	return t, prop
}
