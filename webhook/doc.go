// Package webhook tells the backend of every user's change: JSON batches
// POSTed to each configured endpoint, signed, delivered at least once
// across node failures (docs/webhooks.md).
//
// The flow of one change:
//
//	viewActor publishes ─Hooks.Changed─▶ fresh (in memory, every change, by user)
//	flush (every FlushEvery, or MaxBatch waiting) ─store.HookStore.PutHooks─▶ a row per endpoint and user: her latest
//	                                             ─endpoint.enqueue─▶ each endpoint's backlog (every change; over MaxBacklog coalesced)
//	worker (per endpoint and shard) ─backlog, else PendingHooks─▶ POST {"events":[...]} ─2xx─▶ DoneHooks (up to the versions sent)
//	                                                             ─5xx, 429, timeout─▶ back off (full jitter, Retry-After), the same batch again
//	sweep (every Sweep) ─OrphanHooks─▶ rows of a dead node ─ClaimHooks─▶ this node, for the users whose view it owns ─Query─▶ a change not written is told
//
// A change counts as published to the webhooks once its row is in the
// store. While its node lives and the endpoint's backlog is under
// MaxBacklog every change is sent, in version order per user; over it, or
// when the node dies (the new owner of the user's view claims her row),
// the user's latest state is. Each event holds the user's full state at
// its version, so a receiver keeps the highest version per user and a
// duplicate is harmless.
package webhook
