package gateway

import (
	"net/http"
	"syscall"

	"github.com/lesismal/nbio"
	"github.com/lesismal/nbio/nbhttp"
)

// corkHandshake holds back what the handshake writes on a plain TCP
// connection (TCP_CORK) until the returned call: the 101 that nbio's
// upgrader writes and the hello after it then leave in one segment, one
// pass through the kernel's transmit path (on loopback, the receiver's
// too) and one wake-up of the device, instead of two of each
// (BENCHMARKS.md, connect). The kernel sends corked data after 200 ms
// whatever happens, so a forgotten call delays, never loses. A TLS or
// non-nbio connection is left alone (the returned call does nothing).
func corkHandshake(w http.ResponseWriter) (uncork func()) {
	res, ok := w.(*nbhttp.Response)
	if !ok || res.Parser == nil {
		return func() {}
	}
	c := nbioOf(res.Parser.Conn)
	if c == nil || setCork(c, 1) != nil {
		return func() {}
	}
	return func() { _ = setCork(c, 0) }
}

func setCork(c *nbio.Conn, on int) error {
	raw, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	err = raw.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_CORK, on) })
	if err != nil {
		return err
	}
	return serr
}
