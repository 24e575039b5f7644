package gateway

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/presence-im/presence/messages"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// The hello's fast path writes what protojson reads back as the same
// frame, and leaves to protojson every hello whose strings need escaping
// or whose platform has no name, appending nothing.
func TestHelloFastPath(t *testing.T) {
	full := &messages.Hello{ConnId: "n1-0123abcd", Node: "n1", User: "alice@example.com", Device: "phone:2", Epoch: math.MaxUint64,
		HeartbeatIntervalMs: 25000, HeartbeatClass: "battery", StaleMs: math.MaxUint32, HalfOpenBoundMs: 1, IdleAfterMs: 300000,
		Platform: messages.Platform_mobile}
	check := func(name string, h *messages.Hello) {
		t.Helper()
		b, ok := appendJSONHello([]byte("x"), h)
		if !ok {
			t.Fatalf("%s: not taken", name)
		}
		var f messages.Frame
		if err := protojson.Unmarshal(b[1:], &f); err != nil {
			t.Fatalf("%s: protojson cannot read %s: %v", name, b[1:], err)
		}
		if want := (&messages.Frame{Kind: &messages.Frame_Hello{Hello: h}}); !proto.Equal(&f, want) {
			t.Fatalf("%s: %s reads back as %v, want %v", name, b[1:], &f, want)
		}
	}
	check("full", full)
	check("empty", &messages.Hello{})
	check("ids only", &messages.Hello{ConnId: "c", Node: "n", User: "u", Device: "d"})

	r := rand.New(rand.NewPCG(1, 2))
	id := func() string {
		const chars = "abcXYZ019._-@:"
		b := make([]byte, r.IntN(4))
		for i := range b {
			b[i] = chars[r.IntN(len(chars))]
		}
		return string(b)
	}
	small := func() uint32 { return []uint32{0, 1, math.MaxUint32, r.Uint32()}[r.IntN(4)] }
	for range 2000 {
		check("random", &messages.Hello{ConnId: id(), Node: id(), User: id(), Device: id(), Epoch: []uint64{0, 1, math.MaxUint64, r.Uint64()}[r.IntN(4)],
			HeartbeatIntervalMs: small(), HeartbeatClass: id(), StaleMs: small(), HalfOpenBoundMs: small(), IdleAfterMs: small(),
			Platform: messages.Platform(r.IntN(len(messages.Platform_name)))})
	}

	for name, h := range map[string]*messages.Hello{
		"a quote":          {User: `al"ice`},
		"a backslash":      {Node: `n\1`},
		"a control":        {Device: "d\n"},
		"non-ASCII":        {HeartbeatClass: "bätt"},
		"HTML":             {ConnId: "<c>"},
		"unnamed platform": {Platform: messages.Platform(99)},
	} {
		if b, ok := appendJSONHello([]byte("x"), h); ok || string(b) != "x" {
			t.Errorf("%s: taken (%v) or appended to (%q), want left to protojson", name, ok, b)
		}
	}
}
