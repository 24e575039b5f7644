package bench

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/presence-im/presence/internal/freeport"
)

// clockTick is the unit of utime and stime in /proc/PID/stat: USER_HZ,
// 100 on every Linux this runs on.
const clockTick = 10 * time.Millisecond

// cpuTime is utime + stime of the processes, user and kernel.
func cpuTime(pids ...int) (time.Duration, error) {
	var total time.Duration
	for _, pid := range pids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return 0, err
		}
		// The command name (field 2) may hold spaces: fields count from
		// after its closing parenthesis, where field 3 is state.
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
		ut, _ := strconv.ParseInt(f[11], 10, 64)
		st, _ := strconv.ParseInt(f[12], 10, 64)
		total += time.Duration(ut+st) * clockTick
	}
	return total, nil
}

// threadTime is what the threads of some processes got from the
// scheduler, to the nanosecond: the time they ran (user and kernel) and
// the time they waited, runnable, for a core.
type threadTime struct{ run, wait time.Duration }

func (a threadTime) add(b threadTime) threadTime { return threadTime{a.run + b.run, a.wait + b.wait} }
func (a threadTime) sub(b threadTime) threadTime { return threadTime{a.run - b.run, a.wait - b.wait} }

// scale is a rate's share of a window: t times f.
func (a threadTime) scale(f float64) threadTime {
	return threadTime{time.Duration(f * float64(a.run)), time.Duration(f * float64(a.wait))}
}

// runTime is the processes' threadTime (the first two fields of each
// /proc/PID/task/TID/schedstat): for windows too short for cpuTime's
// clock ticks. A thread that ended is left out, which a Go process's
// rarely do.
func runTime(pids ...int) (threadTime, error) {
	var total threadTime
	for _, pid := range pids {
		tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
		if err != nil {
			return threadTime{}, err
		}
		for _, t := range tasks {
			b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/schedstat", pid, t.Name()))
			if err != nil {
				continue // ended meanwhile
			}
			f := strings.Fields(string(b))
			if len(f) < 2 {
				continue
			}
			run, _ := strconv.ParseInt(f[0], 10, 64)
			wait, _ := strconv.ParseInt(f[1], 10, 64)
			total.run += time.Duration(run)
			total.wait += time.Duration(wait)
		}
	}
	return total, nil
}

// idleTime is the machine's cores' idle time, all of them summed (idle
// and iowait of /proc/stat's first line, in clock ticks), and how many
// cores there are.
func idleTime() (time.Duration, int, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0, err
	}
	var idle time.Duration
	cpus := 0
	for i, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) < 6 || !strings.HasPrefix(f[0], "cpu") {
			continue
		}
		if i > 0 { // cpu0, cpu1, ...: the first line is their sum
			cpus++
			continue
		}
		for _, v := range f[4:6] {
			n, _ := strconv.ParseInt(v, 10, 64)
			idle += time.Duration(n) * clockTick
		}
	}
	if cpus == 0 {
		return 0, 0, fmt.Errorf("bench: no cpu line in /proc/stat")
	}
	return idle, cpus, nil
}

// rss is the resident set of the processes, in bytes.
func rss(pids ...int) (float64, error) {
	var total float64
	for _, pid := range pids {
		f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
		if err != nil {
			return 0, err
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
				kb, _ := strconv.ParseFloat(strings.Fields(v)[0], 64)
				total += kb * 1024
			}
		}
		f.Close()
	}
	return total, nil
}

// freePort is a loopback port free right now.
func freePort() (int, error) {
	// free on every address (load processes use 127.0.0.x source ports)
	// and below the ephemeral range, which the load processes' thousands
	// of dials draw from: a port from there could be taken by one before
	// the system binds it (TestStormSmoke's node once never came up)
	addr, err := freeport.On("0.0.0.0")
	if err != nil {
		return 0, err
	}
	_, port, _ := net.SplitHostPort(addr)
	return strconv.Atoi(port)
}

// Machine describes where the figures come from: CPU model, cores, load.
func Machine() string {
	model := "unknown CPU"
	if out, err := exec.Command("lscpu").Output(); err == nil {
		for _, l := range strings.Split(string(out), "\n") {
			if v, ok := strings.CutPrefix(l, "Model name:"); ok {
				model = strings.TrimSpace(v)
			}
		}
	}
	load, _ := os.ReadFile("/proc/loadavg")
	lf := strings.Fields(string(load))
	if len(lf) > 3 {
		lf = lf[:3]
	}
	return fmt.Sprintf("%s, %d cores, load average %s", model, runtime.NumCPU(), strings.Join(lf, " "))
}
