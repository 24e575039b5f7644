// Package cluster hides gossip membership behind a small interface. A
// Membership says who the members are; a Roster is what a member's actors
// read of it (who owns an identity and whether it moved, which actor
// addresses are gone, a death verdict in doubt, each member's Meta), so
// that package actors never holds the gossip itself and its tests fake the
// membership with a plain struct. Gossip (over hashicorp/memberlist)
// tells subscribers, in order and off memberlist's locks, when one joins,
// leaves or is declared dead, and logs one line for each. Provider hands
// proto.actor the alive members, tells which member owns an identity
// (Owner: where actors.ClusterDirectory keeps its lease or view actor) and
// which identities a change moved (Moved), and is the Roster over its
// Gossip; Host adds the kinds a node hosts outside proto.actor and what
// it spawns before the gossip joins. FenceWatch tells a node that may have been declared dead, or
// whose side of a split the resolver (Decide: keep-majority over a quorum
// base, StableAfter, the oldest member breaking a tie) does not keep, to
// fence itself; a fenced node's new incarnation rejoins (Rejoin) once the
// resolver or an operator lets it serve.
// Rendezvous is where proto.actor puts an identity, for those that must
// know it from outside (the chaos harness); Timings derives the timings a
// member adds to its preset.
//
// Addresses: a node binds its gossip where --gossip says and tells the
// others the address Advertised returns (behind NAT, in containers, on
// 0.0.0.0); it joins seeds that may be host names, resolved again on every
// try until one other than itself answers or GossipConfig.JoinRetry ends.
//
// Single is the membership of a node running alone.
//
// RemoteConfig is a member's proto.actor remote: with the cluster key, on
// mutual TLS whose CA is derived from the key (RemoteTLS), so the key that
// admits a process to the gossip is also the only way into the actor
// transport.
package cluster
