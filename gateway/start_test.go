package gateway

import (
	"strings"
	"testing"
	"time"
)

// A gateway whose address is taken fails to start at once, with the
// listener's error (the chaos harness starts a node again on fresh ports
// when it exits on "address already in use"). nbio's engine, failing to
// listen, stopped itself and waited for goroutines it had not started:
// presenced neither listened nor exited (TestClusterJoinIsInvisible's
// "n2 not ready within 20s", its goroutine dump in nbio.(*Engine).Stop).
func TestStartOnATakenAddressFails(t *testing.T) {
	nd := startNode(t) // its gateway holds the address
	srv := New(Options{Listen: nd.srv.Addr()}, nd.n.Gateway(), nd.timing, secret, nil)
	done := make(chan error, 1)
	go func() { done <- srv.Start() }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "address already in use") {
			t.Fatalf("Start on a taken address = %v, want address already in use", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Start on a taken address still waits after 10 s")
	}
	if srv.Ready() == nil {
		t.Fatal("a gateway that failed to start says it is ready")
	}
}
