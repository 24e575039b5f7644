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
	"strings"
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
	in, err := Launch(dir, settings...)
	if err != nil {
		return "", nil, err
	}
	return in.DSN, in.Stop, nil
}

// Instance is a server Launch started, which a test can stop and start
// again on the same port and data, or pause (the chaos store scenarios).
type Instance struct {
	DSN  string
	Port int

	bin, dir, data, opts string
	cred                 *syscall.Credential
}

// Launch starts a server as Server does and returns it. dir may be
// relative (the chaos harness's report directory): the server runs in its
// data directory, so its socket directory is made absolute.
func Launch(dir string, settings ...string) (*Instance, error) {
	bin, err := binDir()
	if err != nil {
		return nil, err
	}
	if dir, err = filepath.Abs(dir); err != nil {
		return nil, err
	}
	in := &Instance{bin: bin, dir: dir, data: filepath.Join(dir, "data")}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return nil, fmt.Errorf("pgtest: running as root needs a postgres user: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		in.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := os.Chown(dir, uid, gid); err != nil {
			return nil, err
		}
	}
	if err := in.run("initdb", "-D", in.data, "-U", "presence", "--auth=trust", "--no-sync"); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	in.Port = ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	in.opts = fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1", in.Port, dir)
	for _, s := range settings {
		in.opts += " -c " + s
	}
	if err := in.Start(); err != nil {
		return nil, err
	}
	in.DSN = fmt.Sprintf("postgres://presence@127.0.0.1:%d/postgres?sslmode=disable", in.Port)
	return in, nil
}

// Start starts the server (again), waiting until it accepts connections.
func (in *Instance) Start() error {
	if err := in.run("pg_ctl", "-D", in.data, "-o", in.opts, "-l", filepath.Join(in.dir, "log"), "-w", "start"); err != nil {
		return errors.Join(err, logTail(filepath.Join(in.dir, "log")))
	}
	return nil
}

// Stop stops the server at once (immediate mode: no checkpoint, every
// connection cut).
func (in *Instance) Stop() error {
	return in.run("pg_ctl", "-D", in.data, "-m", "immediate", "-w", "stop")
}

// Signal sends sig to the server and every process it started (the
// backends serving connections, too): SIGSTOP pauses all of it, SIGCONT
// resumes it.
func (in *Instance) Signal(sig syscall.Signal) error {
	b, err := os.ReadFile(filepath.Join(in.data, "postmaster.pid"))
	if err != nil {
		return fmt.Errorf("pgtest: not running: %w", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0]))
	if err != nil {
		return fmt.Errorf("pgtest: postmaster.pid: %w", err)
	}
	pids := append([]int{pid}, children(pid)...)
	for _, p := range pids {
		if err := syscall.Kill(p, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
			return fmt.Errorf("pgtest: signal %d: %w", p, err)
		}
	}
	return nil
}

// children are the processes whose parent is pid (from /proc).
func children(pid int) []int {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	var out []int
	for _, st := range stats {
		b, err := os.ReadFile(st)
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, not ')'.
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		if len(f) > 1 && f[1] == strconv.Itoa(pid) {
			if c, err := strconv.Atoi(filepath.Base(filepath.Dir(st))); err == nil {
				out = append(out, c)
			}
		}
	}
	return out
}

func (in *Instance) run(name string, args ...string) error {
	cmd := exec.Command(filepath.Join(in.bin, name), args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: in.cred}
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("pgtest: %s: %w\n%s", name, err, out)
	}
	return nil
}

// logTail is the end of the server's log, for an error.
func logTail(path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	return fmt.Errorf("pgtest: server log: %s", b[max(0, len(b)-2000):])
}
