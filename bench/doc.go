// Package bench is a harness, not part of the service: the load
// benchmarks behind cmd/bench (BENCHMARKS.md) and chaos's --load devices.
//
// It starts the systems it compares as processes of their own (presenced,
// the Redis-TTL peer of this package, Centrifugo where it is installed)
// and drives them from load processes of their own (`bench worker`, at
// most PerWorker devices each, each dialing from its own 127.0.0.x), which
// the orchestrator talks to over their standard input and output. Its
// commands: Run (`bench run`: memory, CPU per heartbeat, lookups, connect
// and fan-out against the peers), RunStore (the store under a mass
// disconnect), RunStorm (the login wave over delivery tiers), RunScale
// (what grows with the cluster), and Background (chaos's load). Every
// address it dials or listens on is on loopback.
package bench
