package actors

import (
	"context"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/presence-im/presence/messages"
)

// Kind is a kind of actor reached by identity.
type Kind string

const (
	KindLease Kind = "lease" // identity "user/device"
	KindView  Kind = "view"  // identity "user"
)

// Directory reaches lease and view actors by identity, activating them on
// first use. Send never blocks on the target.
type Directory interface {
	Send(kind Kind, identity string, msg any)
	Request(ctx context.Context, kind Kind, identity string, msg any) (any, error)
	// Passivate lets an idle actor stop. It returns false, and the actor must
	// stay, when a message sent through the directory is still on its way to
	// it (received counts the directory messages the actor has handled).
	Passivate(kind Kind, identity string, self *actor.PID, received uint64) bool
	// Owns reports whether this node holds identity's actor (always,
	// alone): one that is not the owner's is a leftover of an earlier
	// topology or of a stale route.
	Owns(kind Kind, identity string) bool
	// Forget drops actor self of identity, which is stopping because it
	// no longer owns it: a later message activates a new actor.
	Forget(kind Kind, identity string, self *actor.PID)
	// Count returns the live actors of a kind.
	Count(kind Kind) int
	// Stop stops every actor once it handled the messages in its mailbox
	// (a release a connection sent as its node stopped), and waits for
	// them.
	Stop()
}

// viewReader is a directory whose lookups may read a local view's state
// instead of asking the view (LocalDirectory.readView).
type viewReader interface {
	attachView(user string, self *actor.PID, a *viewActor)
	readView(ctx context.Context, user string) (*messages.ViewState, bool)
}

func leaseID(user, device string) string { return user + "/" + device }
