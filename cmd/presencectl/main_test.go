package main

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/presence-im/presence/gateway"
)

func TestTokenVerifies(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run([]string{"token", "--user", "alice", "--device", "phone", "--secret", "k"}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	c, err := gateway.Tokens{Key: []byte("k")}.Verify(lines[len(lines)-1])
	if err != nil || c.User != "alice" || c.Device != "phone" {
		t.Fatalf("token does not verify: %v %+v", err, c)
	}
	if code := run([]string{"token", "--user", "a/b", "--device", "d"}, &out, &errOut); code != 2 {
		t.Fatalf("bad user: exit %d, want 2", code)
	}
	// The secret file of a rotation: the first line signs.
	file := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(file, []byte("new\nold\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if code := run([]string{"token", "--user", "alice", "--device", "phone", "--secret-file", file}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	lines = strings.Split(strings.TrimSpace(out.String()), "\n")
	if _, err := (gateway.Tokens{Key: []byte("new")}).Verify(lines[len(lines)-1]); err != nil {
		t.Fatalf("token from --secret-file: %v", err)
	}
}

func TestSimIsDeterministic(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the whole E01 simulation twice")
	}
	var a, b, errOut bytes.Buffer
	if run([]string{"sim", "e01", "--json", "--timing", "fast"}, &a, &errOut) != 0 || run([]string{"sim", "e01", "--json", "--timing", "fast"}, &b, &errOut) != 0 {
		t.Fatal(errOut.String())
	}
	if a.String() != b.String() || !strings.Contains(a.String(), `"lower_bound_ok":true`) {
		t.Fatalf("runs differ or fail:\n%s\n%s", a.String(), b.String())
	}
}

func TestSimActivity(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run([]string{"sim", "activity", "--timing", "fast", "--users", "20"}, &out, &errOut); code != 0 ||
		!strings.Contains(out.String(), "40 after the failover") {
		t.Fatalf("sim activity: exit %d\n%s%s", code, out.String(), errOut.String())
	}
	if code := run([]string{"sim", "nothing"}, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), "e01 and activity") {
		t.Fatalf("sim nothing: exit %d, %q", code, errOut.String())
	}
}

func TestStatusReportsAdminErrors(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/api/presence/alice" {
			_, _ = w.Write([]byte(`{"user":"alice","status":"online"}`))
			return
		}
		http.Error(w, `{"error":"unknown"}`, 503)
	}))
	defer srv.Close()
	var out, errOut bytes.Buffer
	if code := run([]string{"status", "--admin", srv.URL, "alice"}, &out, &errOut); code != 0 || !strings.Contains(out.String(), "online") {
		t.Fatalf("status alice: exit %d, %q", code, out.String())
	}
	if code := run([]string{"status", "--admin", srv.URL, "bob"}, &out, &errOut); code != 1 {
		t.Fatalf("status of an unreachable owner: exit %d, want 1", code)
	}
}

// A wrong command line exits 2 with the usage and sends nothing: an
// unknown command, and the argument-less admin commands given an argument
// (the admin URL points nowhere, so a request would fail with 1).
func TestWrongCommandLineExits2(t *testing.T) {
	for _, args := range [][]string{
		{"nosuch"},
		{"ready", "--admin", "http://127.0.0.1:1", "extra"},
		{"serve-alone", "--admin", "http://127.0.0.1:1", "extra"},
		{"ready", "--nosuch-flag"},
	} {
		var out, errOut bytes.Buffer
		if code := run(args, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), "usage") || out.Len() != 0 {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want 2 and the usage", args, code, out.String(), errOut.String())
		}
	}
}

// --ws and --admin lists drop spaces around the commas and empty items.
func TestSplitList(t *testing.T) {
	got := splitList(" ws://a:1/ws, ,ws://b:2/ws ,")
	if want := []string{"ws://a:1/ws", "ws://b:2/ws"}; !slices.Equal(got, want) {
		t.Fatalf("splitList = %q, want %q", got, want)
	}
	if got := splitList(""); len(got) != 0 {
		t.Fatalf("splitList of nothing = %q, want none", got)
	}
}
