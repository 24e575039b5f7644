package actors

import (
	"github.com/asynkron/protoactor-go/actor"
	"github.com/presence-im/presence/messages"
)

func refOf(pid *actor.PID) *messages.PidRef {
	return &messages.PidRef{Address: pid.GetAddress(), Id: pid.GetId()}
}

func pidOf(r *messages.PidRef) *actor.PID {
	if r.GetId() == "" {
		return nil
	}
	return actor.NewPID(r.GetAddress(), r.GetId())
}

func sinkKey(pid *actor.PID) string { return pid.GetAddress() + "/" + pid.GetId() }
