// Package chaos is the chaos harness: it starts a local cluster of
// presenced processes on free loopback ports, connects simulated devices
// and one subscriber per node, injects a fault (Scenarios) and measures, for
// every device that left and every subscriber, the time from the departure
// to the offline event against the bound the node publishes at
// /api/bounds. It also looks for what must never happen: a false offline
// for a device still connected, a ghost (a route to a device that left), a
// lost event, a version going back, a node that does not fence or rejoin.
// cmd/chaos runs it and writes report.json and report.html.
package chaos
