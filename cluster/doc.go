// Package cluster hides gossip membership behind a small interface. A
// Membership says who the members are and tells subscribers when one joins,
// leaves or is declared dead; the admin API and (with the cluster issue) the
// proto.actor ClusterProvider and the lease reclaim read it.
//
// Single is the membership of a node running alone. The memberlist-backed
// implementation arrives with the cluster issue.
//
// RemoteConfig is a member's proto.actor remote: with the cluster key, on
// mutual TLS whose CA is derived from the key (RemoteTLS), so the key that
// admits a process to the gossip is also the only way into the actor
// transport.
package cluster
