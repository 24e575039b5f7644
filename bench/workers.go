package bench

import (
	"bufio"
	"cmp"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// PerWorker is the default of Options.PerWorker: the file limit of a
// process is 20,000 here, and a few processes spread the client CPU.
const PerWorker = 4000

// workerProc is one load process driven over its standard input and output.
type workerProc struct {
	cmd      *exec.Cmd
	in       io.WriteCloser
	replies  chan string
	progress atomic.Int64
	first    int
	count    int
	mu       sync.Mutex
}

// spawnWorkers starts the load processes for n devices, each from its own
// source address 127.0.0.2, .3, ..., and dialing urls[w % len(urls)]: on
// more than one node, as many processes on each (devices spread evenly);
// concurrency dials are spread over them.
func spawnWorkers(o Options, urls []string, dir string) ([]*workerProc, error) {
	nw := (o.N + o.PerWorker - 1) / o.PerWorker
	if k := len(urls) * o.Devices; k > 1 {
		nw = (nw + k - 1) / k * k
	}
	users, group := o.N/o.Devices, nw/o.Devices // each group of processes: every user, one device name
	var ws []*workerProc
	for w := range nw {
		g, j := w/group, w%group
		first, count := w*o.PerWorker, min(o.PerWorker, o.N-w*o.PerWorker)
		if len(urls) > 1 || o.Devices > 1 {
			first, count = j*users/group, (j+1)*users/group-j*users/group
		}
		conc := max(1, o.Concurrency/nw)
		args := []string{"worker", "--url", urls[(w+g)%len(urls)], "--src", fmt.Sprintf("127.0.0.%d", 2+w), "--secret", cmp.Or(o.Secret, benchSecret),
			"--prefix", "bench", "--device", deviceNames[g], "--first", strconv.Itoa(first), "--count", strconv.Itoa(count),
			"--concurrency", strconv.Itoa(conc), "--interval", o.Interval.String()}
		if o.Binary {
			args = append(args, "--binary")
		}
		if o.CFProtocol {
			args = append(args, "--centrifugo")
		}
		if o.AckEvery {
			args = append(args, "--ack-every")
		}
		if o.Profile != "" && w == 0 {
			args = append(args, "--cpuprofile", filepath.Join(o.Profile, fmt.Sprintf("worker-%d.pprof", time.Now().Unix())))
		}
		wp, err := startWorker(o.Self, filepath.Join(dir, fmt.Sprintf("worker%d.log", w)), args)
		if err != nil {
			stopWorkers(ws)
			return nil, err
		}
		wp.first, wp.count = first, count
		ws = append(ws, wp)
	}
	return ws, nil
}

func startWorker(bin, logPath string, args []string) (*workerProc, error) {
	cmd := exec.Command(bin, args...)
	log, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd.Stderr = log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	wp := &workerProc{cmd: cmd, in: in, replies: make(chan string, 16)}
	go func() {
		defer log.Close()
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<20), 64<<20)
		for sc.Scan() {
			l := sc.Text()
			if v, ok := strings.CutPrefix(l, "progress "); ok {
				n, _ := strconv.ParseInt(v, 10, 64)
				wp.progress.Store(n)
				continue
			}
			wp.replies <- l
		}
		close(wp.replies)
	}()
	return wp, nil
}

// await reads the next answer line, which must start with want.
func (w *workerProc) await(want string, within time.Duration) ([]string, error) {
	select {
	case l, ok := <-w.replies:
		if !ok {
			return nil, fmt.Errorf("bench: worker %d ended (its log says why)", w.cmd.Process.Pid)
		}
		f := strings.Fields(l)
		if len(f) == 0 || f[0] != want {
			return nil, fmt.Errorf("bench: worker answered %q, want %s", l, want)
		}
		return f[1:], nil
	case <-time.After(within):
		return nil, fmt.Errorf("bench: worker %d: no %q within %v", w.cmd.Process.Pid, want, within)
	}
}

// ask sends one command and reads its answer.
func (w *workerProc) ask(cmd, want string, within time.Duration) ([]string, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, err := fmt.Fprintln(w.in, cmd); err != nil {
		return nil, err
	}
	return w.await(want, within)
}

func workerPids(ws []*workerProc) []int {
	pids := make([]int, len(ws))
	for i, w := range ws {
		pids[i] = w.cmd.Process.Pid
	}
	return pids
}

func stopWorkers(ws []*workerProc) {
	for _, w := range ws {
		_, _ = fmt.Fprintln(w.in, "quit")
		_ = w.in.Close()
	}
	for _, w := range ws {
		done := make(chan struct{})
		go func() { _ = w.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			_ = w.cmd.Process.Kill()
			<-done
		}
	}
}

// workerStats is the sum of the workers' stats lines.
type workerStats struct {
	acks, sent, unexpected, live int64
	wrote, read                  int64 // bytes on the load's sockets, each way
	codes                        map[string]int64
	errs                         []string
}

func collectStats(ws []*workerProc) (workerStats, error) {
	s := workerStats{codes: map[string]int64{}}
	for _, w := range ws {
		f, err := w.ask("stats", "stats", 30*time.Second)
		if err != nil {
			return s, err
		}
		if len(f) < 7 {
			return s, fmt.Errorf("bench: load process %d: stats line %q", w.cmd.Process.Pid, strings.Join(f, " "))
		}
		v := make([]int64, 6)
		for i := range v {
			v[i], _ = strconv.ParseInt(f[i], 10, 64)
		}
		s.acks += v[0]
		s.sent += v[1]
		s.unexpected += v[2]
		s.live += v[3]
		s.wrote += v[4]
		s.read += v[5]
		for _, kv := range strings.Split(f[6], ",") {
			if c, n, ok := strings.Cut(kv, ":"); ok {
				k, _ := strconv.ParseInt(n, 10, 64)
				s.codes[c] += k
			}
		}
		if e, err := strconv.Unquote(strings.Join(f[7:], " ")); err == nil && e != "" {
			s.errs = append(s.errs, e)
		}
	}
	return s, nil
}
