// Package freeport picks ports for the processes the tests, the chaos
// harness and the benchmarks start.
package freeport

import (
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
)

// On is a host:port on host free for TCP and UDP (a gossip port is both),
// below the kernel's ephemeral range (32768 and up on Linux): a port the
// kernel handed out and the caller freed could be given to another
// process's outgoing connection before the process meant to bind it does
// ("address already in use").
func On(host string) (string, error) {
	var err error
	for range 200 {
		addr := net.JoinHostPort(host, strconv.Itoa(20000+rand.IntN(12000)))
		var ln net.Listener
		if ln, err = net.Listen("tcp", addr); err != nil {
			continue
		}
		var pc net.PacketConn
		pc, err = net.ListenPacket("udp", addr)
		ln.Close()
		if err != nil {
			continue
		}
		pc.Close()
		return addr, nil
	}
	return "", fmt.Errorf("freeport: no free port on %s below the ephemeral range: %w", host, err)
}
