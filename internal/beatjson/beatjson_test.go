package beatjson

import (
	"math"
	"testing"

	"github.com/presence-im/presence/messages"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// protojsonIn decodes as a node (gateway's jsonIn) and the SDK
// (client.Conn's decode) do: unknown fields dropped.
var protojsonIn = protojson.UnmarshalOptions{DiscardUnknown: true}

// The fast path takes the heartbeats clients send, and leaves to protojson
// every other shape.
func TestParseHeartbeat(t *testing.T) {
	for _, c := range []struct {
		in      string
		seq     uint64
		ts      int64
		fastish bool
	}{
		{`{"heartbeat":{"seq":"42","client_ts_ms":"1795947512634"}}`, 42, 1795947512634, true},
		{` { "heartbeat" : { "client_ts_ms" : 7 , "seq" : 3 } } `, 3, 7, true},
		{`{"heartbeat":{}}`, 0, 0, true},
		{`{"heartbeat":{"client_ts_ms":"-5"}}`, 0, -5, true},
		{`{"heartbeat":{"seq":"18446744073709551615"}}`, 0, 0, false}, // 20 digits: protojson decides
		{`{"heartbeat":{"clientTsMs":"1"}}`, 0, 0, false},             // JSON name: protojson
		{`{"heartbeat":{"seq":"1","seq":"2"}}`, 0, 0, false},
		{`{"heartbeat":{"seq":"01"}}`, 0, 0, false},
		{`{"heartbeat":{"seq":1.0}}`, 0, 0, false},
		{`{"heartbeat":{"seq":"1",}}`, 0, 0, false},
		{`{"heartbeat":{,"seq":"1"}}`, 0, 0, false},
		{`{"heartbeat":{"seq":"1"},"subscribe":{}}`, 0, 0, false},
		{`{"heartbeat":{"seq":"1"}}x`, 0, 0, false},
		{`{"heartbeat":{"seq":"1\u0030"}}`, 0, 0, false},
		{`{"heartbeat_ack":{"seq":"1"}}`, 0, 0, false},
		{`{"heartbeat ":{"seq":"1"}}`, 0, 0, false},
	} {
		hb, ok := ParseHeartbeat([]byte(c.in))
		if ok != c.fastish || ok && (hb.Seq != c.seq || hb.TS != c.ts || hb.Ack != AckUnset) {
			t.Errorf("%s: %+v %v, want %d %d %v", c.in, hb, ok, c.seq, c.ts, c.fastish)
		}
	}
}

// The fast path reads the ack field a bare true or false, and leaves
// every other value (null, a string, a second ack) to protojson.
func TestParseHeartbeatAck(t *testing.T) {
	for _, c := range []struct {
		in      string
		ack     Ack
		fastish bool
	}{
		{`{"heartbeat":{"seq":"3","client_ts_ms":"7","ack":false}}`, AckNo, true},
		{`{"heartbeat":{"ack" : true,"seq":"3"}}`, AckYes, true},
		{`{"heartbeat":{"ack":false}}`, AckNo, true},
		{`{"heartbeat":{"seq":"3"}}`, AckUnset, true},
		{`{"heartbeat":{"ack":null}}`, 0, false},
		{`{"heartbeat":{"ack":"false"}}`, 0, false},
		{`{"heartbeat":{"ack":0}}`, 0, false},
		{`{"heartbeat":{"ack":falsey}}`, 0, false},
		{`{"heartbeat":{"ack":true,"ack":false}}`, 0, false},
	} {
		hb, ok := ParseHeartbeat([]byte(c.in))
		if ok != c.fastish || ok && hb.Ack != c.ack {
			t.Errorf("%s: %+v %v, want ack %d %v", c.in, hb, ok, c.ack, c.fastish)
		}
	}
}

// The SDK's fast path takes the acks a node writes, and leaves to
// protojson every other shape.
func TestParseAck(t *testing.T) {
	for _, c := range []struct {
		in      string
		want    HeartbeatAck
		fastish bool
	}{
		{`{"heartbeat_ack":{"seq":"42","client_ts_ms":"1795947512634","server_ts_ms":"1795947512635"}}`, HeartbeatAck{42, 1795947512634, 1795947512635}, true},
		{` {"heartbeat_ack": {"server_ts_ms":-1, "seq":7}}`, HeartbeatAck{7, 0, -1}, true},
		{`{"heartbeat_ack":{}}`, HeartbeatAck{}, true},
		{`{"heartbeat_ack":{"seq":"-1"}}`, HeartbeatAck{}, false},
		{`{"heartbeat_ack":{"seq":"1","seq":"1"}}`, HeartbeatAck{}, false},
		{`{"heartbeat_ack":{"serverTsMs":"1"}}`, HeartbeatAck{}, false},
		{`{"heartbeat_ack":{"seq":"1"},"x":1}`, HeartbeatAck{}, false},
		{`{"heartbeat_ack":{"seq":"1",}}`, HeartbeatAck{}, false},
		{`{"heartbeat":{"seq":"1"}}`, HeartbeatAck{}, false},
	} {
		a, ok := ParseAck([]byte(c.in))
		if ok != c.fastish || ok && a != c.want {
			t.Errorf("%s: %+v %v, want %+v %v", c.in, a, ok, c.want, c.fastish)
		}
	}
}

// What the fast path accepts, protojson decodes to the same heartbeat.
func FuzzHeartbeatFastPath(f *testing.F) {
	for _, s := range []string{
		`{"heartbeat":{"seq":"42","client_ts_ms":"1795947512634"}}`, `{"heartbeat":{"client_ts_ms":-9223372036854775808}}`,
		`{"heartbeat":{}}`, `{"heartbeat":{"seq":9999999999999999999}}`, `{"heartbeat":{"seq":"1","client_ts_ms":"-0"}}`,
		`{"heartbeat":{"seq":"2","client_ts_ms":"5","ack":false}}`, `{"heartbeat":{"ack":true}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		hb, ok := ParseHeartbeat(data)
		if !ok {
			return
		}
		beat := &messages.Heartbeat{Seq: hb.Seq, ClientTsMs: hb.TS}
		if hb.Ack != AckUnset {
			beat.Ack = proto.Bool(hb.Ack == AckYes)
		}
		sameAsProtojson(t, data, &messages.Frame{Kind: &messages.Frame_Heartbeat{Heartbeat: beat}})
	})
}

// What the SDK's fast path accepts, protojson decodes to the same ack.
func FuzzAckFastPath(f *testing.F) {
	for _, s := range []string{
		`{"heartbeat_ack":{"seq":"42","client_ts_ms":"1795947512634","server_ts_ms":"1795947512635"}}`,
		`{"heartbeat_ack":{"server_ts_ms":-9223372036854775808}}`, `{"heartbeat_ack":{}}`, `{"heartbeat_ack":{"seq":1}}`,
		`{"heartbeat_ack":{"seq":"-1"}}`, `{"heartbeat_ack":{"client_ts_ms":"-0"}}`, `{"heartbeat_ack":{"seq":"18446744073709551615"}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		a, ok := ParseAck(data)
		if !ok {
			return
		}
		sameAsProtojson(t, data, &messages.Frame{Kind: &messages.Frame_HeartbeatAck{HeartbeatAck: &messages.HeartbeatAck{
			Seq: a.Seq, ClientTsMs: a.ClientTS, ServerTsMs: a.ServerTS}}})
	})
}

// sameAsProtojson fails unless protojson decodes data to want.
func sameAsProtojson(t *testing.T, data []byte, want *messages.Frame) {
	t.Helper()
	got := &messages.Frame{}
	if err := protojsonIn.Unmarshal(data, got); err != nil {
		t.Fatalf("fast path took %q, protojson refuses it: %v", data, err)
	}
	if !proto.Equal(got, want) {
		t.Fatalf("%q: fast path %v, protojson %v", data, want, got)
	}
}

// What the Append functions write decodes, through protojson, to the same
// frame, zero fields and the extremes included, and the fast paths read
// it back, but for a 20-digit seq, which they leave to protojson.
func TestAppendRoundTrips(t *testing.T) {
	for _, c := range []struct {
		seq     uint64
		cts, st int64
	}{{42, 1795947512634, 1795947512635}, {0, 0, 1}, {1, -5, 0}, {0, 0, 0},
		{math.MaxUint64, math.MinInt64, math.MaxInt64}, {1e19 - 1, math.MaxInt64, math.MinInt64}} {
		fast := c.seq < 1e19
		b := AppendAck(nil, c.seq, c.cts, c.st)
		want := HeartbeatAck{c.seq, c.cts, c.st}
		sameAsProtojson(t, b, &messages.Frame{Kind: &messages.Frame_HeartbeatAck{HeartbeatAck: &messages.HeartbeatAck{
			Seq: want.Seq, ClientTsMs: want.ClientTS, ServerTsMs: want.ServerTS}}})
		if got, ok := ParseAck(b); ok != fast || ok && got != want {
			t.Errorf("%s reads back as %+v %v, want %+v %v", b, got, ok, want, fast)
		}
		for _, ack := range []Ack{AckUnset, AckNo, AckYes} {
			b := AppendHeartbeat(nil, c.seq, c.cts, ack)
			beat := &messages.Heartbeat{Seq: c.seq, ClientTsMs: c.cts}
			if ack != AckUnset {
				beat.Ack = proto.Bool(ack == AckYes)
			}
			sameAsProtojson(t, b, &messages.Frame{Kind: &messages.Frame_Heartbeat{Heartbeat: beat}})
			if got, ok := ParseHeartbeat(b); ok != fast || ok && got != (Beat{c.seq, c.cts, ack}) {
				t.Errorf("%s reads back as %+v %v, want %v", b, got, ok, fast)
			}
		}
	}
}

// The SDK's heartbeat and the node's ack cost no allocation beyond their
// buffer, and reading them none at all.
func TestFastPathsDoNotAllocate(t *testing.T) {
	buf := make([]byte, 0, 128)
	var sink int
	if n := testing.AllocsPerRun(100, func() {
		b := AppendHeartbeat(buf, 42, 1795947512634, AckNo)
		hb, _ := ParseHeartbeat(b)
		a := AppendAck(buf, hb.Seq, hb.TS, 1795947512635)
		got, _ := ParseAck(a)
		sink += int(got.Seq)
	}); n != 0 {
		t.Fatalf("%v allocations a heartbeat and ack, want 0", n)
	}
	if sink == 0 {
		t.Fatal("nothing read")
	}
}

// The fast path takes the events a node writes, and leaves to protojson
// every other shape.
func TestParsePresence(t *testing.T) {
	for _, c := range []struct {
		in      string
		want    *messages.Presence
		fastish bool
	}{
		{`{"presence":{"user":"alice","status":"offline","version":"7","last_seen_minute":29912345,"show":"away"}}`,
			&messages.Presence{User: "alice", Status: messages.Status_offline, Version: 7, LastSeenMinute: 29912345, Show: messages.Show_away}, true},
		{`{"presence":{"user":"bob", "status":"online", "version":"3", "show":"available", "devices":[{"platform":"mobile", "activity":"idle"}, {"platform":"web"}], "idle_since_minute":"5", "status_text":"en réunion"}}`,
			&messages.Presence{User: "bob", Status: messages.Status_online, Version: 3, Show: messages.Show_available, IdleSinceMinute: 5, StatusText: "en réunion",
				Devices: []*messages.DevicePresence{{Platform: messages.Platform_mobile, Activity: messages.Activity_idle}, {Platform: messages.Platform_web}}}, true},
		{`{"presence":{}}`, &messages.Presence{}, true},
		{`{"presence":{"devices":[]}}`, &messages.Presence{}, true},
		{`{"presence":{"user":"a\"b"}}`, nil, false},                 // an escape: protojson
		{`{"presence":{"user":"a","user":"b"}}`, nil, false},         // twice
		{`{"presence":{"lastSeenMinute":1}}`, nil, false},            // JSON name
		{`{"presence":{"status":"ONLINE"}}`, nil, false},             // not an enum name
		{`{"presence":{"status":1}}`, nil, false},                    // a number
		{`{"presence":{"user":null}}`, nil, false},                   // null
		{`{"presence":{"last_seen_minute":4294967296}}`, nil, false}, // over uint32
		{`{"presence":{"devices":[{"platform":"web","platform":"web"}]}}`, nil, false},
		{`{"presence":{"devices":[{"platform":"web"},]}}`, nil, false},
		{`{"presence":{"user":"\xff"}}`, nil, false}, // not UTF-8
		{`{"presence":{"user":"a"},"heartbeat":{}}`, nil, false},
		{`{"heartbeat":{"seq":"1"}}`, nil, false},
	} {
		got, ok := ParsePresence([]byte(c.in))
		if ok != c.fastish || ok && !proto.Equal(got, c.want) {
			t.Errorf("%s: %v %v, want %v %v", c.in, got, ok, c.want, c.fastish)
		}
		if ok {
			sameAsProtojson(t, []byte(c.in), &messages.Frame{Kind: &messages.Frame_Presence{Presence: got}})
		}
	}
}

// What the fast path accepts, protojson decodes to the same event.
func FuzzPresenceFastPath(f *testing.F) {
	for _, s := range []string{
		`{"presence":{"user":"alice","status":"offline","version":"7","last_seen_minute":29912345,"show":"away"}}`,
		`{"presence":{"user":"bob","status":"online","devices":[{"platform":"mobile","activity":"idle"},{}],"status_text":"x"}}`,
		`{"presence":{"version":18446744073709551615,"idle_since_minute":"4294967295"}}`, `{"presence":{"status":"unknown"}}`,
		`{"presence":{"user":"é","status_text":"\u00e9"}}`, `{"presence":{"show":"auto","devices":[]}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		pr, ok := ParsePresence(data)
		if !ok {
			return
		}
		sameAsProtojson(t, data, &messages.Frame{Kind: &messages.Frame_Presence{Presence: pr}})
	})
}

// Every event the node's protojson writes, the fast path reads to the
// same Presence (protojson's random spaces included: each is marshalled
// many times).
func TestParsePresenceReadsWhatProtojsonWrites(t *testing.T) {
	out := protojson.MarshalOptions{UseProtoNames: true}
	for i, pr := range []*messages.Presence{
		{User: "bench000001", Status: messages.Status_offline, Version: 2, LastSeenMinute: 29912345},
		{User: "u", Status: messages.Status_online, Version: 1e19 - 1, Show: messages.Show_dnd, StatusText: "dans le train 🚆",
			Devices: []*messages.DevicePresence{{Platform: messages.Platform_desktop, Activity: messages.Activity_active}, {Platform: messages.Platform_other, Activity: messages.Activity_background}}},
		{User: "v", Status: messages.Status_recently, Version: 1, IdleSinceMinute: math.MaxUint32},
		{Status: messages.Status_unknown},
	} {
		for range 20 {
			b, err := out.Marshal(&messages.Frame{Kind: &messages.Frame_Presence{Presence: pr}})
			if err != nil {
				t.Fatal(err)
			}
			got, ok := ParsePresence(b)
			if !ok || !proto.Equal(got, pr) {
				t.Fatalf("event %d, %s: fast path %v %v", i, b, got, ok)
			}
		}
	}
}
