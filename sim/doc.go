// Package sim replays the core state machines in virtual time with a
// discrete-event loop: the same core.Conn, core.Lease and core.View the
// actors run, with the actors' glue (stale checks every check period,
// jittered renewals, expiry and debounce timers) as events in a queue
// ordered by (time, insertion). Randomness comes from core.Rand(seed, name)
// per entity, so a run is byte-identical for a seed.
//
// E01 reproduces the seed article's experiments (detection latency per
// leave mode, renewal peaks, the TTL < renew negative control).
package sim
