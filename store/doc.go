// Package store holds the hard state of presence, the little that must
// outlive an actor: privacy policies (PolicyStore) and each device's attempt
// floor and each user's last-seen time (HistoryStore). Lease and view actors
// are soft state rebuilt from live connections; they read these on
// activation and write through on change.
//
// The memory implementations serve single-node runs and tests; they are safe
// for concurrent use.
package store
