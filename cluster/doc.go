// Package cluster hides gossip membership behind a small interface. A
// Membership says who the members are; Gossip (over hashicorp/memberlist)
// tells subscribers, in order and off memberlist's locks, when one joins,
// leaves or is declared dead, and logs one line for each. Provider hands
// proto.actor the alive members; FenceWatch tells a node that may have
// been declared dead to fence itself. Rendezvous is where proto.actor puts
// an identity, for those that must know it from outside (the chaos
// harness); Timings derives the timings a member adds to its preset.
//
// Addresses: a node binds its gossip where --gossip says and tells the
// others the address Advertised returns (behind NAT, in containers, on
// 0.0.0.0); it joins seeds that may be host names, resolved again on every
// try until one other than itself answers or GossipConfig.JoinRetry ends.
//
// Single is the membership of a node running alone.
package cluster
