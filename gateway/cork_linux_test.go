package gateway

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"net/http"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The 101 and the hello leave in one segment (corkHandshake): the
// device's kernel counts one segment with data after its request; and the
// connection is not left corked, or every later frame would wait up to
// 200 ms for the kernel.
func TestHandshakeAndHelloInOneSegment(t *testing.T) {
	nd := startNode(t)
	for i := range 3 {
		conn, err := net.Dial("tcp", nd.srv.Addr())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
		fmt.Fprintf(conn, "GET /ws?attempt=%d HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"+
			"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\nAuthorization: Bearer %s\r\n\r\n", i+1, nd.token("alice", fmt.Sprint("d", i)))
		r := bufio.NewReader(conn)
		if res, err := http.ReadResponse(r, nil); err != nil || res.StatusCode != 101 {
			t.Fatalf("handshake: %v %v", res, err)
		}
		if op, body := readFrame(t, r); op != 1 || !bytes.Contains(body, []byte(`"hello"`)) {
			t.Fatalf("first frame %d %q, want the hello", op, body)
		}
		if n := dataSegmentsIn(t, conn); n != 1 {
			t.Fatalf("the 101 and the hello came in %d segments, want 1", n)
		}
	}
	for _, s := range liveSockets(t, nd, 3) {
		if corked := sockopt(t, s, syscall.IPPROTO_TCP, syscall.TCP_CORK); corked != 0 {
			t.Fatalf("TCP_CORK after the hello = %d, want 0", corked)
		}
	}
}

// An accepted socket has no TCP keep-alive (Server.Start: heartbeats are
// the liveness, and Go's default keep-alive cost four system calls per
// connection) and keeps Go's TCP_NODELAY (an ack must not wait for Nagle).
func TestAcceptedSocketsWithoutKeepAlive(t *testing.T) {
	nd := startNode(t)
	c := nd.dial("alice", "d1", 1)
	defer c.Close()
	for _, s := range liveSockets(t, nd, 1) {
		if on := sockopt(t, s, syscall.SOL_SOCKET, syscall.SO_KEEPALIVE); on != 0 {
			t.Fatalf("SO_KEEPALIVE = %d, want 0", on)
		}
		if on := sockopt(t, s, syscall.IPPROTO_TCP, syscall.TCP_NODELAY); on == 0 {
			t.Fatal("TCP_NODELAY = 0, want it set")
		}
	}
}

// liveSockets are the node's live sockets, which must be want.
func liveSockets(t *testing.T, nd *node, want int) []*socket {
	t.Helper()
	nd.srv.mu.Lock()
	defer nd.srv.mu.Unlock()
	if len(nd.srv.live) != want {
		t.Fatalf("%d live sockets, want %d", len(nd.srv.live), want)
	}
	var out []*socket
	for s := range nd.srv.live {
		out = append(out, s)
	}
	return out
}

// sockopt is an integer option of s's socket on the node's side.
func sockopt(t *testing.T, s *socket, level, opt int) int {
	t.Helper()
	raw, err := nbioConn(s.ws).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	v := -1
	if cerr := raw.Control(func(fd uintptr) { v, err = syscall.GetsockoptInt(int(fd), level, opt) }); cerr != nil {
		t.Fatal(cerr)
	}
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// dataSegmentsIn is the number of segments with data conn's kernel took
// in (TCP_INFO).
func dataSegmentsIn(t *testing.T, conn net.Conn) uint32 {
	t.Helper()
	raw, err := conn.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var info *unix.TCPInfo
	_ = raw.Control(func(fd uintptr) { info, err = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO) })
	if err != nil {
		t.Fatal(err)
	}
	return info.Data_segs_in
}
