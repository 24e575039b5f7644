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
	nd.srv.mu.Lock()
	defer nd.srv.mu.Unlock()
	if len(nd.srv.live) != 3 {
		t.Fatalf("%d live sockets, want 3", len(nd.srv.live))
	}
	for s := range nd.srv.live {
		raw, err := nbioConn(s.ws).SyscallConn()
		if err != nil {
			t.Fatal(err)
		}
		corked := -1
		_ = raw.Control(func(fd uintptr) { corked, err = syscall.GetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_CORK) })
		if err != nil || corked != 0 {
			t.Fatalf("TCP_CORK after the hello = %d (%v), want 0", corked, err)
		}
	}
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
