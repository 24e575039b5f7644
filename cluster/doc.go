// Package cluster hides gossip membership behind a small interface. A
// Membership says who the members are and tells subscribers when one joins,
// leaves or is declared dead; the admin API, the proto.actor ClusterProvider
// (Provider) and the lease reclaim read it.
//
// Gossip is the memberlist implementation every presenced runs (a cluster
// of one without --join); Single is the membership of a node alone in
// tests. Rendezvous is where proto.actor puts an identity, for those that
// must know it from outside (the chaos harness).
package cluster
