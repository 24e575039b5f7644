package bench

import (
	"math"
	"os"
	"runtime"
	"testing"
	"time"
)

// A round's CPU and waits beyond the heartbeats': the quiet window's
// rate, scaled to the round's length, is taken off; per event over every
// round. The cores' idle time is its share of the windows addIdle is
// given, nothing taken off.
func TestFanCostTakesTheQuietRateOff(t *testing.T) {
	at := time.Unix(1000, 0)
	ms := time.Millisecond
	read := func(after time.Duration, sys, load, wait, idle time.Duration) cpuRead {
		return cpuRead{at: at.Add(after), sys: threadTime{sys, wait}, load: threadTime{load, wait / 2}, idle: idle, cpus: 2, ok: true}
	}
	var c fanCost
	// Quiet: 600 ms in which the system ran 60 ms and the load 30 ms. The
	// round: 1.2 s with 520 ms and 360 ms, of which 120 and 60 the rate's;
	// the system waited 12 ms in the quiet window and 224 in the round
	// (24 the rate's), the load half that; 480 ms of idle cores in 2.4 s.
	c.add(read(0, 0, 0, 0, 0), read(600*ms, 60*ms, 30*ms, 12*ms, 0),
		read(time.Second, 100*ms, 50*ms, 12*ms, 100*ms), read(2200*ms, 620*ms, 410*ms, 236*ms, 580*ms), 1000)
	c.addIdle(read(time.Second, 0, 0, 0, 100*ms), read(2200*ms, 0, 0, 0, 580*ms), true)
	// A round with no quiet rate: 1 s, 200 ms and 100 ms, no wait, no idle
	// in 2 s of cores; a window not ok counts nothing.
	c.add(read(0, 0, 0, 0, 0), read(time.Second, 0, 0, 0, 0), read(time.Second, 0, 0, 0, 0), read(2*time.Second, 200*ms, 100*ms, 0, 0), 1000)
	c.addIdle(read(time.Second, 0, 0, 0, 0), read(2*time.Second, 0, 0, 0, 0), true)
	c.addIdle(read(0, 0, 0, 0, 0), read(time.Second, 0, 0, 0, time.Second), false)
	got := c.perEvent()
	// (400 + 200) ms, (300 + 100) ms, 200 ms and 100 ms over 2,000 events;
	// 480 ms idle of (2.4 + 2) s of cores.
	want := FanoutCost{CPU: 300, LoadCPU: 200, Wait: 100, LoadWait: 50, Idle: 100 * 480.0 / 4400}
	if got != want {
		t.Fatalf("per event: %+v; want %+v", got, want)
	}
}

// within takes the reads from the first event's to the last's, each the
// first read at or after it; not ok when no read falls between them.
func TestWithinTheEvents(t *testing.T) {
	base := time.Unix(1000, 0)
	var reads []cpuRead
	for i := range 20 { // every 20 ms from base
		reads = append(reads, cpuRead{at: base.Add(time.Duration(i) * cpuEvery), sys: threadTime{run: time.Duration(i)}, ok: true})
	}
	ns := func(d time.Duration) int64 { return base.Add(d).UnixNano() }
	if a, b, ok := within(reads, []int64{ns(205 * time.Millisecond), ns(130 * time.Millisecond), ns(190 * time.Millisecond)}); !ok || a.sys.run != 7 || b.sys.run != 11 {
		t.Fatalf("reads %d and %d (%v), want 7 and 11", a.sys.run, b.sys.run, ok) // 140 ms, the first at or after 130; 220 after 205
	}
	if _, _, ok := within(reads, []int64{ns(125 * time.Millisecond), ns(135 * time.Millisecond)}); ok {
		t.Fatal("events between two reads: want not ok")
	}
	if _, _, ok := within(reads, []int64{ns(time.Second)}); ok {
		t.Fatal("an event after the last read: want not ok")
	}
	if _, _, ok := within(reads, nil); ok {
		t.Fatal("no event: want not ok")
	}
}

// A process that could not be read, or no event at all, is not a
// measurement: NaN, which the table prints as not measured.
func TestFanCostUnreadIsNaN(t *testing.T) {
	ok := cpuRead{at: time.Unix(1, 0), cpus: 2, ok: true}
	later := cpuRead{at: time.Unix(2, 0), cpus: 2, ok: true}
	nan := func(f FanoutCost) bool {
		return math.IsNaN(f.CPU) && math.IsNaN(f.LoadCPU) && math.IsNaN(f.Wait) && math.IsNaN(f.LoadWait) && math.IsNaN(f.Idle)
	}
	var c fanCost
	c.add(ok, later, ok, cpuRead{at: time.Unix(3, 0)}, 100)
	if f := c.perEvent(); !nan(f) {
		t.Fatalf("an unread process gave %+v; want NaN", f)
	}
	var none fanCost
	none.add(ok, later, ok, later, 0)
	if f := none.perEvent(); !nan(f) {
		t.Fatalf("no event gave %+v; want NaN", f)
	}
	var still fanCost // a quiet window of no length has no rate
	still.add(ok, ok, ok, later, 10)
	if f := still.perEvent(); !nan(f) {
		t.Fatalf("a quiet window of no length gave %+v; want NaN", f)
	}
}

// runTime reads this process's threads: their run time grows while the
// process works, and a process that is gone is an error. idleTime reads
// the machine's cores.
func TestRunTimeGrowsAndFailsForTheGone(t *testing.T) {
	before, err := runTime(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	for x, start := 0, time.Now(); time.Since(start) < 20*time.Millisecond; x++ {
		_ = x * x
	}
	after, err := runTime(os.Getpid())
	if err != nil || after.run <= before.run || after.wait < before.wait {
		t.Fatalf("thread time %+v then %+v (%v): want the run time to grow, the wait never to go back", before, after, err)
	}
	if _, err := runTime(1 << 30); err == nil {
		t.Fatal("a pid that does not exist: want an error")
	}
	// /proc/stat counts every online core, this process may run on fewer.
	if idle, cpus, err := idleTime(); err != nil || cpus < runtime.NumCPU() || idle <= 0 {
		t.Fatalf("idle %v on %d cores (%v): want some idle time on at least %d cores", idle, cpus, err, runtime.NumCPU())
	}
}

// The reads that bracket a burst: the last at least cpuEvery before its
// first event, the first at or after its last; all of them without one.
func TestBurstBracketsTheEvents(t *testing.T) {
	base := time.Unix(1000, 0)
	var reads []cpuRead
	for i := range 20 { // every 20 ms from base
		reads = append(reads, cpuRead{at: base.Add(time.Duration(i) * cpuEvery), sys: threadTime{run: time.Duration(i)}, ok: true})
	}
	recv := []int64{base.Add(205 * time.Millisecond).UnixNano(), base.Add(130 * time.Millisecond).UnixNano(), base.Add(190 * time.Millisecond).UnixNano()}
	a, b := burst(reads, recv)
	if a.sys.run != 5 || b.sys.run != 11 { // 100 ms is the last at or before 110; 220 the first at or after 205
		t.Fatalf("bracket reads %d and %d, want 5 and 11", a.sys.run, b.sys.run)
	}
	if a, b := burst(reads, nil); a.sys.run != 0 || b.sys.run != 19 {
		t.Fatalf("no event: reads %d and %d, want the first and the last", a.sys.run, b.sys.run)
	}
}
