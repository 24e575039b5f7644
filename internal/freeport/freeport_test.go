package freeport

import (
	"net"
	"strconv"
	"testing"
)

// A port given is below the ephemeral range and bindable for TCP and UDP
// at once.
func TestOnBelowTheEphemeralRange(t *testing.T) {
	for range 50 {
		addr, err := On("127.0.0.1")
		if err != nil {
			t.Fatal(err)
		}
		_, p, _ := net.SplitHostPort(addr)
		if port, _ := strconv.Atoi(p); port < 20000 || port >= 32768 {
			t.Fatalf("port %d: want 20000 to 32767", port)
		}
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatalf("tcp %s: %v", addr, err)
		}
		pc, err := net.ListenPacket("udp", addr)
		if err != nil {
			t.Fatalf("udp %s: %v", addr, err)
		}
		ln.Close()
		pc.Close()
	}
}
