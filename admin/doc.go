// Package admin serves a node's admin HTTP API (docs/operations.md): health,
// Prometheus metrics, bounds, presence and route lookups, privacy policies,
// the event stream and its history, and every node's actors with their
// state (GET /api/actors, through each node's inspector actor).
// Every request passes the Host check, then the bearer token when one is
// set (docs/security.md).
// Every handler reaches the actors through the actors.Node and answers 503
// when they cannot be reached in time: unknown is never reported as offline.
package admin
