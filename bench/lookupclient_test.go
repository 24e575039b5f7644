package bench

import (
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The lookup client reads whole answers over one connection, dials again
// once when the server closed it while idle, and reports a status other
// than 200 as a failed lookup.
func TestLookupClient(t *testing.T) {
	var conns int
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer tok" {
			http.Error(w, "no token", http.StatusUnauthorized)
			return
		}
		_, _ = w.Write([]byte(strings.Repeat("x", 3000) + r.URL.Path))
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns++
		}
	}
	srv.Start()
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	errs := make(chan error, 4)
	go func() {
		c := newLookupClient(addr)
		defer c.Close()
		errs <- c.Get(lookupRequest(addr, "/a", "Authorization: Bearer tok"))
		errs <- c.Get(lookupRequest(addr, "/b", "Authorization: Bearer tok"))
		srv.CloseClientConnections()
		errs <- c.Get(lookupRequest(addr, "/c", "Authorization: Bearer tok"))
		errs <- c.Get(lookupRequest(addr, "/d"))
	}()
	for i, want := range []string{"", "", "", "HTTP 401"} {
		err := <-errs
		if (want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), want)) {
			t.Fatalf("lookup %d: %v, want %q", i, err, want)
		}
	}
	if conns != 2 {
		t.Fatalf("%d connections, want 2 (one closed by the server while idle)", conns)
	}
}

// The lookup client leaves its thread alive: a child started from that
// thread with Pdeathsig (the load processes, the node) would be killed
// with it. A lock of its own keeps the goroutine on the thread that
// starts the child; the client's Close must undo its own. (The main
// thread is never ended, so the test runs on another.)
func TestLookupClientKeepsItsThread(t *testing.T) {
	release := onMainThreadElsewhere()
	if release == nil {
		t.Skip("no goroutine landed on the main thread")
	}
	defer release()
	child := make(chan *exec.Cmd, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		cmd := exec.Command("sleep", "30")
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			t.Error(err)
		}
		c := newLookupClient("127.0.0.1:1")
		c.Close()
		child <- cmd
	}()
	cmd := <-child
	if cmd.Process == nil {
		return
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		t.Fatalf("the child died with the lookup client's thread: %v", err)
	case <-time.After(500 * time.Millisecond):
	}
	_ = cmd.Process.Kill()
	<-exited
}

// onMainThreadElsewhere parks a goroutine locked to the process's main
// thread (up to 10,000 tries until one lands there; nil: none did), so
// that no other goroutine runs on it until release.
func onMainThreadElsewhere() (release func()) {
	done := make(chan struct{})
	for range 10000 {
		on := make(chan bool)
		go func() {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			main := syscall.Gettid() == os.Getpid()
			on <- main
			if main {
				<-done
			}
		}()
		if <-on {
			return func() { close(done) }
		}
	}
	return nil
}
