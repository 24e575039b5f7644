package core

import "fmt"

// DriftRun is how many heartbeats in a row whose seq does not grow or
// whose client time goes backwards trip the drift fuse (seed 002 §4.3).
const DriftRun = 3

// Beats is a connection's heartbeat sequence as its socket reads it: the
// seq restart rule and the drift fuse. Production runs it on every
// heartbeat (actors.Conn.Heartbeat) and the E01 simulator replays it
// (sim). Not safe for concurrent use: the socket's reads of one
// connection come one at a time.
type Beats struct {
	Seq      uint64 // last heartbeat seq (0: none yet)
	TS       int64  // last heartbeat's client time, Unix ms (0: none given)
	Restarts uint64 // times the seq started again

	run    int      // heartbeats in a row out of order
	runSeq bool     // in the run, a seq that did not grow
	runTS  bool     // in the run, a client time that went back
	good   BeatMark // the last heartbeat before the run
}

// BeatMark is one heartbeat's seq and client time.
type BeatMark struct {
	Seq uint64
	TS  int64
}

func (m BeatMark) String() string { return fmt.Sprintf("seq %d client_ts_ms %d", m.Seq, m.TS) }

// Drift is a tripped fuse: the heartbeats before the run (Before), the one
// that tripped it (After), and what went wrong in the run (Cause: "seq",
// "client_ts" or "seq and client_ts").
type Drift struct {
	Before, After BeatMark
	Cause         string
}

// BeatResult is what one heartbeat asks of the connection.
type BeatResult struct {
	// Restart: the seq did not grow, which marks a client that restarted
	// its counter (counted, nothing else).
	Restart bool
	// Drift is set on the heartbeat that completes a run of DriftRun out of
	// order: the connection's state is in doubt (state sync).
	Drift *Drift
}

// Beat records a heartbeat. Seq 0 is a Ping or Pong: a sign of life with
// no sequence, which changes nothing here. A client time of 0 is not
// given and never counts as going backwards.
func (b *Beats) Beat(seq uint64, ts int64) BeatResult {
	if seq == 0 {
		return BeatResult{}
	}
	var res BeatResult
	seqBack := b.Seq != 0 && seq <= b.Seq
	tsBack := ts != 0 && b.TS != 0 && ts < b.TS
	if seqBack {
		res.Restart = true
		b.Restarts++
	}
	cur := BeatMark{seq, ts}
	if !seqBack && !tsBack {
		b.run, b.runSeq, b.runTS, b.good = 0, false, false, cur
	} else {
		b.run++
		b.runSeq, b.runTS = b.runSeq || seqBack, b.runTS || tsBack
		if b.run == DriftRun {
			res.Drift = &Drift{Before: b.good, After: cur, Cause: driftCause(b.runSeq, b.runTS)}
			b.run, b.runSeq, b.runTS, b.good = 0, false, false, cur
		}
	}
	b.Seq = seq
	if ts != 0 {
		b.TS = ts
	}
	return res
}

// Reset forgets the sequence: a device that answered a state sync starts
// a new run from its next heartbeat.
func (b *Beats) Reset() { *b = Beats{Restarts: b.Restarts} }

func driftCause(seq, ts bool) string {
	switch {
	case seq && ts:
		return "seq and client_ts"
	case seq:
		return "seq"
	}
	return "client_ts"
}
