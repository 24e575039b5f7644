// Package pgtest starts a throwaway PostgreSQL server for tests and
// benchmarks, from the PostgreSQL server binaries on the machine (Debian's
// postgresql package; `make tools` installs it), in a temporary directory,
// on a free loopback port. As root it runs the server as the postgres
// user, which PostgreSQL requires.
package pgtest

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
)

// binDir finds initdb: on PATH, else Debian's versioned directory.
func binDir() (string, error) {
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p), nil
	}
	m, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	if len(m) == 0 {
		return "", fmt.Errorf("pgtest: no initdb: `make tools` installs Debian's postgresql")
	}
	return filepath.Dir(m[len(m)-1]), nil
}

// Start starts a server without durability (fsync off: tests do not need
// it) and returns its DSN; it is stopped and removed at cleanup.
func Start(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "pgtest-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	dsn, stop, err := Server(dir, "fsync=off", "synchronous_commit=off")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Error(err)
		}
	})
	return dsn
}

// Server starts a server with its data in dir (which must exist) and
// the settings (name=value, as postgres -c takes them) on top of
// PostgreSQL's defaults, and returns its DSN and how to stop it.
func Server(dir string, settings ...string) (dsn string, stop func() error, err error) {
	bin, err := binDir()
	if err != nil {
		return "", nil, err
	}
	var cred *syscall.Credential
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return "", nil, fmt.Errorf("pgtest: running as root needs a postgres user: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := os.Chown(dir, uid, gid); err != nil {
			return "", nil, err
		}
	}
	run := func(name string, args ...string) error {
		cmd := exec.Command(filepath.Join(bin, name), args...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		cmd.Env = append(os.Environ(), "LC_ALL=C")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("pgtest: %s: %w\n%s", name, err, out)
		}
		return nil
	}
	data := filepath.Join(dir, "data")
	if err := run("initdb", "-D", data, "-U", "presence", "--auth=trust", "--no-sync"); err != nil {
		return "", nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1", port, dir)
	for _, s := range settings {
		opts += " -c " + s
	}
	if err := run("pg_ctl", "-D", data, "-o", opts, "-l", filepath.Join(dir, "log"), "-w", "start"); err != nil {
		return "", nil, errors.Join(err, logTail(filepath.Join(dir, "log")))
	}
	stop = func() error { return run("pg_ctl", "-D", data, "-m", "immediate", "-w", "stop") }
	return fmt.Sprintf("postgres://presence@127.0.0.1:%d/postgres?sslmode=disable", port), stop, nil
}

// logTail is the end of the server's log, for an error.
func logTail(path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	return fmt.Errorf("pgtest: server log: %s", b[max(0, len(b)-2000):])
}
