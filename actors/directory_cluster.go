package actors

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/asynkron/protoactor-go/actor"
	pcluster "github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/eventstream"
	"github.com/presence-im/presence/messages"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// HostName is the directory host's name on every member: it hands
// DirectoryDeliver messages from other members to the node's
// LocalDirectory.
const HostName = "directory"

// ClusterDirectory reaches lease and view actors across the members. An
// identity lives on the member that owns it by the rendezvous hashing
// proto.actor places with (cluster.Roster.Owner, over the members last
// handed to proto.actor), in that member's LocalDirectory:
//
//   - a message for an identity this node owns goes straight to the
//     LocalDirectory;
//   - one for another member's goes, as a DirectoryDeliver, to the
//     directory host (HostName) on that member, which hands it to its
//     LocalDirectory with the original sender (a request is answered by
//     the actor itself).
//
// So every message to an identity passes the owner's LocalDirectory lock
// and count, and an idle actor passivates there without losing one: a
// message that races the stop either was counted before it (the actor
// stays) or activates a new actor, which reloads its hard state from the
// store (docs/architecture.md). Sending never waits for another member:
// the host's address is known without asking anyone, and the remote
// queues the message (one ordered stream per pair of members).
//
// When the topology changes, the host stops the actors whose identity
// this node no longer owns, as proto.actor poisons a grain that moved.
//
// Safe for concurrent use. Send never blocks; Request blocks its caller
// until the answer or the context's deadline.
type ClusterDirectory struct {
	local *LocalDirectory
	root  *actor.RootContext
	owner func(Kind, string) string // the owner's actor address; "": none yet
	gone  func(addr string) bool    // a member declared dead or left (Node.goneAddr)
	log   *slog.Logger
	sub   *eventstream.Subscription
	host  *actor.PID
}

// NewClusterDirectory makes the directory of a cluster member and spawns
// its host; call it before the member starts (other members may send to
// the host at once). owner is the owner's actor address of an identity
// ("" before the first topology), local the node's LocalDirectory, gone
// whether an actor address is a member's this node declared dead or left:
// what it sent is dropped.
func NewClusterDirectory(sys *actor.ActorSystem, local *LocalDirectory, owner func(Kind, string) string, gone func(addr string) bool, log *slog.Logger) (*ClusterDirectory, error) {
	d := &ClusterDirectory{local: local, root: sys.Root, owner: owner, gone: gone, log: log}
	host, err := sys.Root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return directoryHost{d} }), HostName)
	if err != nil {
		return nil, fmt.Errorf("actors: directory host: %w", err)
	}
	d.host = host
	// Published under proto.actor's member-list lock, after the provider
	// updated Owner: only tell the host.
	d.sub = sys.EventStream.Subscribe(func(ev any) {
		if _, ok := ev.(*pcluster.ClusterTopology); ok {
			sys.Root.Send(host, sweepMoved{})
		}
	})
	return d, nil
}

// remote is the directory host of the member that owns an identity, or
// nil if this node owns it (or no topology is known yet).
func (d *ClusterDirectory) remote(kind Kind, id string) *actor.PID {
	owner := d.owner(kind, id)
	if owner == "" || owner == d.root.ActorSystem().Address() {
		return nil
	}
	return actor.NewPID(owner, HostName)
}

func (d *ClusterDirectory) Send(kind Kind, id string, msg any) {
	host := d.remote(kind, id)
	if host == nil {
		d.local.Send(kind, id, msg)
		return
	}
	d.root.Send(host, d.wrap(kind, id, msg))
}

func (d *ClusterDirectory) Request(ctx context.Context, kind Kind, id string, msg any) (any, error) {
	host := d.remote(kind, id)
	if host == nil {
		return d.local.Request(ctx, kind, id, msg)
	}
	timeout := requestTimeout(ctx)
	if timeout <= 0 {
		return nil, fmt.Errorf("actors: %s %s: %w", kind, id, context.DeadlineExceeded)
	}
	res, err := d.root.RequestFuture(host, d.wrap(kind, id, msg), timeout).Result()
	if err != nil {
		return nil, fmt.Errorf("actors: %s %s on %s: %w", kind, id, host.GetAddress(), err)
	}
	return res, nil
}

// wrap packs a directory message for another member's host. Directory
// messages are the protobuf messages of actors.proto; anything else is a
// programming error.
func wrap(kind Kind, id string, msg any) *messages.DirectoryDeliver {
	pm, ok := msg.(proto.Message)
	if !ok {
		panic(fmt.Sprintf("actors: directory message %T is not a protobuf message", msg))
	}
	payload, err := anypb.New(pm)
	if err != nil {
		panic(fmt.Sprintf("actors: packing %T: %v", msg, err))
	}
	return &messages.DirectoryDeliver{Kind: string(kind), Identity: id, Message: payload}
}

// wrap is wrap with this member's actor address as From.
func (d *ClusterDirectory) wrap(kind Kind, id string, msg any) *messages.DirectoryDeliver {
	m := wrap(kind, id, msg)
	m.From = d.root.ActorSystem().Address()
	return m
}

// Passivate asks the node's LocalDirectory: every actor of this node was
// activated there, whoever sent its messages.
func (d *ClusterDirectory) Passivate(kind Kind, id string, self *actor.PID, received uint64) bool {
	return d.local.Passivate(kind, id, self, received)
}

func (d *ClusterDirectory) attachView(user string, self *actor.PID, a *viewActor) {
	d.local.attachView(user, self, a)
}

// readView reads the view of a user this node owns (LocalDirectory.readView);
// another member's is asked through the actors.
func (d *ClusterDirectory) readView(ctx context.Context, user string) (*messages.ViewState, bool) {
	if d.remote(KindView, user) != nil {
		return nil, false
	}
	return d.local.readView(ctx, user)
}

func (d *ClusterDirectory) Owns(kind Kind, id string) bool { return d.remote(kind, id) == nil }

func (d *ClusterDirectory) Forget(kind Kind, id string, self *actor.PID) {
	d.local.Forget(kind, id, self)
}

func (d *ClusterDirectory) Count(kind Kind) int { return d.local.Count(kind) }

func (d *ClusterDirectory) Stop() {
	d.root.ActorSystem().EventStream.Unsubscribe(d.sub)
	d.local.Stop()
}

// sweepMoved tells the directory host that the topology changed.
type sweepMoved struct{}

// directoryHost is the directory host actor (HostName): one per member,
// never passivated. It only takes the LocalDirectory's lock, so nothing
// that it does waits for another member. It drops what a member this node
// declared dead or left sent (DirectoryDeliver.From): that member's
// identities moved, and what it sent arrives only once the network lets
// it through (a partition's heal, or its fenced process's sockets flushed
// as it exits), where a lease's down or release for a device that lives
// on would report it gone (docs/architecture.md, the cluster, 4).
type directoryHost struct{ d *ClusterDirectory }

func (h directoryHost) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *messages.DirectoryDeliver:
		if from := m.GetFrom(); from != "" && h.d.gone != nil && h.d.gone(from) {
			h.d.log.Debug("directory: message from a member declared dead: dropped", "kind", m.GetKind(), "identity", m.GetIdentity(), "from", from)
			return
		}
		kind := Kind(m.GetKind())
		if kind != KindLease && kind != KindView {
			h.d.log.Warn("directory: message for an unknown kind dropped", "kind", m.GetKind(), "from", ctx.Sender().GetAddress())
			return
		}
		msg, err := m.GetMessage().UnmarshalNew()
		if err != nil {
			h.d.log.Warn("directory: message that does not unpack dropped", "kind", m.GetKind(), "identity", m.GetIdentity(), "err", err)
			return
		}
		h.d.local.deliver(kind, m.GetIdentity(), msg, ctx.Sender())
	case sweepMoved:
		if n := h.d.local.stopMoved(h.d.Owns); n > 0 {
			h.d.log.Debug("directory: stopped actors whose identity moved", "actors", n)
		}
	}
}
