package bench

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"runtime"
	"strconv"
	"syscall"
	"time"
)

// lookupClient sends the lookups of an idle window, one at a time, over
// one keep-alive HTTP/1.1 connection with blocking system calls on an OS
// thread of its own, raised (where the process may) 5 nice steps above the
// rest of the bench and the load processes.
//
// The execution traces of a lookup (bench run --profile) showed the
// bench's own process taking most of the slowest lookups with net/http's
// client: an answer the node had written soon after the request sat in
// the socket several times as long before the bench's network poller ran,
// and a request waited to be written while its goroutine's thread had no
// core (BENCHMARKS.md, lookup p99). The figure is the server's lookup
// latency, so its client must not wait for a core behind the load
// processes that stand for 19,000 remote devices; with blocking calls on
// a locked thread the kernel wakes that thread itself when the answer
// arrives, without a hop through the Go scheduler.
type lookupClient struct {
	addr   string // host:port
	fd     int    // -1: not connected
	buf    []byte
	tid    int
	nice   int  // the thread's nice value before
	raised bool // the thread's priority was raised
}

// newLookupClient locks the calling goroutine to its thread and raises the
// thread's priority, until Close.
func newLookupClient(addr string) *lookupClient {
	runtime.LockOSThread()
	c := &lookupClient{addr: addr, fd: -1, buf: make([]byte, 64<<10), tid: syscall.Gettid()}
	if p, err := syscall.Getpriority(syscall.PRIO_PROCESS, c.tid); err == nil {
		c.nice = 20 - p // the raw system call returns 20 - nice
		c.raised = syscall.Setpriority(syscall.PRIO_PROCESS, c.tid, max(c.nice-5, -20)) == nil
	}
	return c
}

// Close closes the connection, puts the thread's priority back and unlocks
// it. The thread must not end with the goroutine (as a locked one does):
// the load processes and the node die with the thread that started them
// (Pdeathsig), and this may be that thread.
func (c *lookupClient) Close() {
	if c.fd >= 0 {
		_ = syscall.Close(c.fd)
		c.fd = -1
	}
	if c.raised {
		_ = syscall.Setpriority(syscall.PRIO_PROCESS, c.tid, c.nice)
	}
	runtime.UnlockOSThread()
}

func (c *lookupClient) dial() error {
	ap, err := net.ResolveTCPAddr("tcp4", c.addr)
	if err != nil {
		return err
	}
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	sa := &syscall.SockaddrInet4{Port: ap.Port}
	copy(sa.Addr[:], ap.IP.To4())
	tv := syscall.NsecToTimeval((10 * time.Second).Nanoseconds())
	if err := errors.Join(syscall.SetsockoptTimeval(fd, syscall.SOL_SOCKET, syscall.SO_RCVTIMEO, &tv),
		syscall.SetsockoptTimeval(fd, syscall.SOL_SOCKET, syscall.SO_SNDTIMEO, &tv),
		syscall.SetsockoptInt(fd, syscall.IPPROTO_TCP, syscall.TCP_NODELAY, 1), syscall.Connect(fd, sa)); err != nil {
		_ = syscall.Close(fd)
		return err
	}
	c.fd = fd
	return nil
}

// Get sends req (a whole HTTP/1.1 request) and reads the answer; an error
// closes the connection (the next Get dials again). A connection the
// server closed while idle is dialed again once.
func (c *lookupClient) Get(req []byte) error {
	for try := 0; ; try++ {
		fresh := c.fd < 0
		if fresh {
			if err := c.dial(); err != nil {
				return err
			}
		}
		status, err := c.roundTrip(req)
		if err != nil {
			c.Close()
			if !fresh && try == 0 {
				continue
			}
			return err
		}
		if status != 200 {
			return fmt.Errorf("bench: lookup: HTTP %d", status)
		}
		return nil
	}
}

func (c *lookupClient) roundTrip(req []byte) (int, error) {
	for w := 0; w < len(req); {
		n, err := syscall.Write(c.fd, req[w:])
		if err != nil {
			return 0, err
		}
		w += n
	}
	have := 0
	for {
		if have == len(c.buf) {
			return 0, errors.New("bench: lookup answer too long")
		}
		n, err := syscall.Read(c.fd, c.buf[have:])
		if err != nil {
			return 0, err
		}
		if n == 0 {
			return 0, errors.New("bench: lookup connection closed")
		}
		have += n
		if status, done, err := answered(c.buf[:have]); done || err != nil {
			return status, err
		}
	}
}

// answered parses an HTTP/1.1 answer read so far: its status, and whether
// its headers and its body (Content-Length, or chunks up to the last, as
// net/http sends a body over 2 KiB) are all in b.
func answered(b []byte) (int, bool, error) {
	end := bytes.Index(b, []byte("\r\n\r\n"))
	if end < 0 {
		return 0, false, nil
	}
	lines := bytes.Split(b[:end], []byte("\r\n"))
	f := bytes.Fields(lines[0])
	if len(f) < 2 {
		return 0, false, fmt.Errorf("bench: lookup answer %q", lines[0])
	}
	status, err := strconv.Atoi(string(f[1]))
	if err != nil {
		return 0, false, fmt.Errorf("bench: lookup answer %q", lines[0])
	}
	for _, l := range lines[1:] {
		k, v, ok := bytes.Cut(l, []byte(":"))
		if ok && bytes.EqualFold(bytes.TrimSpace(k), []byte("Content-Length")) {
			n, err := strconv.Atoi(string(bytes.TrimSpace(v)))
			if err != nil {
				return 0, false, fmt.Errorf("bench: lookup answer's %q", l)
			}
			return status, len(b) >= end+4+n, nil
		}
		if ok && bytes.EqualFold(bytes.TrimSpace(k), []byte("Transfer-Encoding")) && bytes.EqualFold(bytes.TrimSpace(v), []byte("chunked")) {
			return status, bytes.HasSuffix(b[end+4:], []byte("0\r\n\r\n")), nil
		}
	}
	return 0, false, errors.New("bench: lookup answer without a Content-Length")
}

// lookupRequest is a GET of path on host with the headers given, one
// "Name: value" each.
func lookupRequest(host, path string, headers ...string) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "GET %s HTTP/1.1\r\nHost: %s\r\n", path, host)
	for _, h := range headers {
		b.WriteString(h + "\r\n")
	}
	b.WriteString("\r\n")
	return b.Bytes()
}
