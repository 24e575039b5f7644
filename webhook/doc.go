// Package webhook tells the backend of every user's change: JSON batches
// POSTed to each configured endpoint, signed, delivered at least once
// across node failures (docs/webhooks.md).
//
// The flow of one change:
//
//	viewActor publishes ─Hooks.Changed─▶ pending (in memory, the latest per user)
//	flush (every FlushEvery, or MaxBatch pending) ─store.HookStore.PutHooks─▶ a row per endpoint and user
//	worker (per endpoint and shard) ─PendingHooks─▶ POST {"events":[...]} ─2xx─▶ DoneHooks
//	                                               ─5xx, 429, timeout─▶ back off (full jitter, Retry-After), again
//	sweep (every Sweep) ─OrphanHooks─▶ rows of a dead node ─ClaimHooks─▶ this node, for the users whose view it owns
//
// A change counts as published to the webhooks once its row is in the
// store; the node that wrote it delivers it, and when that node dies the
// new owner of the user's view claims and delivers what is left. Each row
// holds the user's full state at its version, so a receiver keeps the
// highest version per user and a duplicate is harmless.
package webhook
