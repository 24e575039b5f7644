package core_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/presence-im/presence/core"
)

func TestNewConn(t *testing.T) {
	c := core.NewConn(t0)
	if !c.Opened.Equal(t0) || !c.LastAlive.Equal(t0) || c.Seq != 0 || c.Restarts != 0 {
		t.Fatalf("NewConn = %+v", c)
	}
	if c.Stale(t0, seedStale) {
		t.Fatal("a new connection is stale")
	}
}

// Beat with a non-increasing seq counts a restart; seq 0 is a Pong.
func TestConnBeat(t *testing.T) {
	type beat struct {
		after time.Duration // since t0
		seq   uint64
		want  bool // restart
	}
	tests := []struct {
		name          string
		beats         []beat
		wantSeq       uint64
		wantRestarts  uint64
		wantLastAlive time.Duration
	}{
		{"first heartbeat", []beat{{30 * time.Second, 1, false}}, 1, 0, 30 * time.Second},
		{"first heartbeat with a high seq", []beat{{time.Second, 42, false}}, 42, 0, time.Second},
		{"growing seqs", []beat{{30 * time.Second, 1, false}, {60 * time.Second, 2, false}, {90 * time.Second, 3, false}}, 3, 0, 90 * time.Second},
		{"gaps in seq are not restarts (lost heartbeats)", []beat{{30 * time.Second, 1, false}, {90 * time.Second, 3, false}}, 3, 0, 90 * time.Second},
		{"repeated seq is a restart", []beat{{30 * time.Second, 3, false}, {60 * time.Second, 3, true}}, 3, 1, 60 * time.Second},
		{"smaller seq is a restart", []beat{{30 * time.Second, 5, false}, {60 * time.Second, 1, true}, {90 * time.Second, 2, false}}, 2, 1, 90 * time.Second},
		{"two restarts", []beat{{1, 5, false}, {2, 1, true}, {3, 7, false}, {4, 7, true}}, 7, 2, 4},
		{"pong only", []beat{{10 * time.Second, 0, false}, {20 * time.Second, 0, false}}, 0, 0, 20 * time.Second},
		{"pong keeps the seq", []beat{{1 * time.Second, 5, false}, {2 * time.Second, 0, false}, {3 * time.Second, 5, true}}, 5, 1, 3 * time.Second},
		{"pong then first heartbeat", []beat{{1 * time.Second, 0, false}, {2 * time.Second, 1, false}}, 1, 0, 2 * time.Second},
		{"late-stamped beat does not move last alive back", []beat{{60 * time.Second, 1, false}, {30 * time.Second, 2, false}}, 2, 0, 60 * time.Second},
		{"same instant", []beat{{0, 1, false}, {0, 2, false}}, 2, 0, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := core.NewConn(t0)
			for i, b := range tc.beats {
				if got := c.Beat(at(b.after), b.seq); got != b.want {
					t.Fatalf("beat %d (seq %d): restart = %v, want %v", i, b.seq, got, b.want)
				}
			}
			if c.Seq != tc.wantSeq || c.Restarts != tc.wantRestarts || !c.LastAlive.Equal(at(tc.wantLastAlive)) {
				t.Fatalf("conn = seq %d restarts %d last alive %v, want %d %d %v",
					c.Seq, c.Restarts, c.LastAlive, tc.wantSeq, tc.wantRestarts, at(tc.wantLastAlive))
			}
			if !c.Opened.Equal(t0) {
				t.Fatalf("opened moved to %v", c.Opened)
			}
		})
	}
}

// Stale uses strict >.
func TestConnStale(t *testing.T) {
	tests := []struct {
		name      string
		lastAlive time.Duration
		now       time.Duration
		want      bool
	}{
		{"just alive", 0, 0, false},
		{"one heartbeat interval", 0, seedHeartbeat, false},
		{"one lost heartbeat (2 x interval)", 0, 2 * seedHeartbeat, false},
		{"exactly stale is not stale", 0, seedStale, false},
		{"1 ns past stale", 0, seedStale + time.Nanosecond, true},
		{"long past", 0, time.Hour, true},
		{"now before last alive", time.Minute, 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := core.NewConn(t0)
			c.Beat(at(tc.lastAlive), 0)
			if got := c.Stale(at(tc.now), seedStale); got != tc.want {
				t.Fatalf("Stale(last alive +%v, now +%v, %v) = %v, want %v", tc.lastAlive, tc.now, seedStale, got, tc.want)
			}
		})
	}
}

// E01 6.1 "丢一次心跳 | 不发布离线": with heartbeats every 30 s, stale 75 s
// and a check every 5 s, losing one heartbeat is never stale; losing two is.
func TestConnOneLostHeartbeatNeverStale(t *testing.T) {
	const check = 5 * time.Second
	run := func(lost map[int]bool) (staleAt time.Duration, found bool) {
		c := core.NewConn(t0)
		var seq uint64
		next := seedHeartbeat
		for now := time.Duration(0); now <= 10*time.Minute; now += check {
			if now == next {
				seq++
				if !lost[int(seq)] {
					c.Beat(at(now), seq)
				}
				next += seedHeartbeat
			}
			if c.Stale(at(now), seedStale) {
				return now, true
			}
		}
		return 0, false
	}
	if when, stale := run(map[int]bool{3: true}); stale {
		t.Fatalf("one lost heartbeat: stale at %v", when)
	}
	if when, stale := run(map[int]bool{3: true, 7: true}); stale {
		t.Fatalf("two separate lost heartbeats: stale at %v", when)
	}
	// Heartbeats 3 and 4 lost: last alive at 60 s, stale after 135 s, seen
	// by the check at 140 s.
	if when, stale := run(map[int]bool{3: true, 4: true}); !stale || when != 140*time.Second {
		t.Fatalf("two lost heartbeats in a row: stale %v at %v, want at 140s", stale, when)
	}
}

func TestValidID(t *testing.T) {
	tests := []struct {
		name string
		id   string
		ok   bool
	}{
		{"letters", "alice", true},
		{"all allowed punctuation", "Alice.B_c-d@example.com:7", true},
		{"digits only", "0123456789", true},
		{"one byte", "a", true},
		{"128 bytes", strings.Repeat("x", core.MaxIDLen), true},
		{"empty", "", false},
		{"129 bytes", strings.Repeat("x", core.MaxIDLen+1), false},
		{"slash separates identities", "alice/phone", false},
		{"space", "alice smith", false},
		{"non-ASCII letter", "zoë", false},
		{"invalid UTF-8", "a\xffb", false},
		{"NUL", "a\x00", false},
		{"newline", "alice\n", false},
		{"plus", "a+b", false},
		{"dot-dot", "..", false},
		{"dot-dot inside", "a..b", false},
		{"one dot", ".", true},
		{"right-to-left override", "bob\u202eexe.txt", false},
		{"escape", "a\x1b[31m", false},
		{"DEL", "a\x7f", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := core.ValidID("user", tc.id)
			if (err == nil) != tc.ok {
				t.Fatalf("ValidID(%q) = %v, want ok %v", tc.id, err, tc.ok)
			}
			if err != nil && (!errors.Is(err, core.ErrBadID) || !strings.Contains(err.Error(), "user id")) {
				t.Fatalf("ValidID(%q) = %v, want ErrBadID naming the kind", tc.id, err)
			}
		})
	}
}
