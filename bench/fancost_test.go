package bench

import (
	"math"
	"os"
	"testing"
	"time"
)

// A round's CPU beyond the heartbeats': the quiet window's rate, scaled
// to the round's length, is taken off; per event over every round.
func TestFanCostTakesTheQuietRateOff(t *testing.T) {
	at := time.Unix(1000, 0)
	read := func(after time.Duration, sys, load time.Duration) cpuRead {
		return cpuRead{at: at.Add(after), sys: sys, load: load, ok: true}
	}
	var c fanCost
	// Quiet: 600 ms in which the system ran 60 ms and the load 30 ms. The
	// round: 1.2 s with 520 ms and 360 ms, of which 120 and 60 the rate's.
	c.add(read(0, 0, 0), read(600*time.Millisecond, 60*time.Millisecond, 30*time.Millisecond),
		read(time.Second, 100*time.Millisecond, 50*time.Millisecond), read(2200*time.Millisecond, 620*time.Millisecond, 410*time.Millisecond), 1000)
	c.add(read(0, 0, 0), read(time.Second, 0, 0), read(time.Second, 0, 0), read(2*time.Second, 200*time.Millisecond, 100*time.Millisecond), 1000)
	sys, load := c.perEvent()
	if sys != 300 || load != 200 { // (400 + 200) ms / 2,000 and (300 + 100) ms / 2,000
		t.Fatalf("per event: system %v µs, load %v µs; want 300 and 200", sys, load)
	}
}

// A process that could not be read, or no event at all, is not a
// measurement: NaN, which the table prints as not measured.
func TestFanCostUnreadIsNaN(t *testing.T) {
	ok := cpuRead{at: time.Unix(1, 0), ok: true}
	later := cpuRead{at: time.Unix(2, 0), ok: true}
	var c fanCost
	c.add(ok, later, ok, cpuRead{at: time.Unix(3, 0)}, 100)
	if s, l := c.perEvent(); !math.IsNaN(s) || !math.IsNaN(l) {
		t.Fatalf("an unread process gave %v, %v; want NaN", s, l)
	}
	var none fanCost
	none.add(ok, later, ok, later, 0)
	if s, _ := none.perEvent(); !math.IsNaN(s) {
		t.Fatalf("no event gave %v; want NaN", s)
	}
	var still fanCost // a quiet window of no length has no rate
	still.add(ok, ok, ok, later, 10)
	if s, _ := still.perEvent(); !math.IsNaN(s) {
		t.Fatalf("a quiet window of no length gave %v; want NaN", s)
	}
}

// runTime reads this process's threads: it grows while the process works,
// and a process that is gone is an error.
func TestRunTimeGrowsAndFailsForTheGone(t *testing.T) {
	before, err := runTime(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	for x, start := 0, time.Now(); time.Since(start) < 20*time.Millisecond; x++ {
		_ = x * x
	}
	after, err := runTime(os.Getpid())
	if err != nil || after <= before {
		t.Fatalf("run time %v then %v (%v): want it to grow", before, after, err)
	}
	if _, err := runTime(1 << 30); err == nil {
		t.Fatal("a pid that does not exist: want an error")
	}
}

// The reads that bracket a burst: the last at least cpuEvery before its
// first event, the first at or after its last; all of them without one.
func TestBurstBracketsTheEvents(t *testing.T) {
	base := time.Unix(1000, 0)
	var reads []cpuRead
	for i := range 20 { // every 20 ms from base
		reads = append(reads, cpuRead{at: base.Add(time.Duration(i) * cpuEvery), sys: time.Duration(i), ok: true})
	}
	recv := []int64{base.Add(205 * time.Millisecond).UnixNano(), base.Add(130 * time.Millisecond).UnixNano(), base.Add(190 * time.Millisecond).UnixNano()}
	a, b := burst(reads, recv)
	if a.sys != 5 || b.sys != 11 { // 100 ms is the last at or before 110; 220 the first at or after 205
		t.Fatalf("bracket reads %d and %d, want 5 and 11", a.sys, b.sys)
	}
	if a, b := burst(reads, nil); a.sys != 0 || b.sys != 19 {
		t.Fatalf("no event: reads %d and %d, want the first and the last", a.sys, b.sys)
	}
}
