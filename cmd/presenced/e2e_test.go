package main

import (
	"context"

	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/presence-im/presence/client"
	"github.com/presence-im/presence/gateway"
	"github.com/presence-im/presence/messages"
)

func freePort(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// The real binary: devices connect, subscribe and get trimmed events; the
// policy is set through the admin API; SIGTERM closes devices with 1001,
// releases their leases and exits 0.
func TestBinaryEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := filepath.Join(t.TempDir(), "presenced")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	listen, admin := freePort(t), freePort(t)
	cmd := exec.Command(bin, "--timing", "fast", "--listen", listen, "--admin", admin, "--secret", "e2e", "--node-id", "e2e", "--drain-spread", "200ms",
		"--policy-dsn", "sqlite:"+filepath.Join(t.TempDir(), "p.db"))
	var logs lockedBuffer
	cmd.Stderr = &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	exited := false
	defer func() {
		if !exited {
			_ = cmd.Process.Kill()
			<-done
		}
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if res, err := http.Get("http://" + admin + "/readyz"); err == nil {
			res.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not ready: %s", logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	req, _ := http.NewRequest("PUT", "http://"+admin+"/api/users/dave/policy", strings.NewReader(`{"granularity":"exact","contacts":["alice"]}`))
	if res, err := http.DefaultClient.Do(req); err != nil || res.StatusCode != 200 {
		t.Fatalf("policy: %v %v", res, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	dial := func(user string) *client.Conn {
		tok, _ := gateway.Tokens{Key: []byte("e2e")}.Mint(user, "phone", time.Hour)
		c, err := client.Dial(ctx, "ws://"+listen+"/ws", client.DialOptions{Token: tok, Attempt: 1})
		if err != nil {
			t.Fatalf("dial %s: %v", user, err)
		}
		return c
	}
	alice := dial("alice")
	_ = alice.Subscribe(ctx, "s1", "dave")
	if f, err := alice.Next(ctx); err != nil || f.GetSnapshot() == nil {
		t.Fatalf("snapshot: %v %v", f, err)
	}
	dave := dial("dave")
	defer dave.CloseNow()
	if f, err := alice.Next(ctx); err != nil || f.GetPresence().GetStatus() != messages.Status_online {
		t.Fatalf("dave online: %v %v", f, err)
	}
	res, err := http.Get("http://" + admin + "/api/route/dave")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()

	_ = cmd.Process.Signal(syscall.SIGTERM)
	for {
		if _, err := alice.Next(ctx); err != nil {
			if code := client.CloseCode(err); code != 1001 {
				t.Fatalf("close on SIGTERM: %d (%v), want 1001", code, err)
			}
			break
		}
	}
	select {
	case err := <-done:
		exited = true
		if err != nil {
			t.Fatalf("exit: %v\n%s", err, logs.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("still running 10 s after SIGTERM\n%s", logs.String())
	}
	if !strings.Contains(logs.String(), "draining") {
		t.Fatalf("no drain in the log:\n%s", logs.String())
	}
}
