package actors

import cmap "github.com/orcaman/concurrent-map"

// proto.actor's process registry spreads the actors' ids over 1024
// concurrent maps, each made of cmap.SHARD_COUNT Go maps (32 by default):
// 32,768 maps. A Go map keeps the group it allocated on its first insert,
// so as actors of ever new ids come and go every map ends up holding one,
// empty or not: about 6 MB that the live heap reached after the first wave
// of the churn benchmark and kept (docs/architecture.md, "Memory"), well
// above what the actors alive need. One Go map per concurrent map (1024,
// each behind its own lock, as many locks as a 2-core node could contend
// for many times over) holds the same ids in 32 times fewer maps. Set in
// init, before any actor system (or the cluster's PID cache, the only other
// user of the package) makes one.
func init() { cmap.SHARD_COUNT = 1 }
