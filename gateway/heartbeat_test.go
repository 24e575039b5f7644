package gateway

import (
	"context"
	"fmt"
	dto "github.com/prometheus/client_model/go"
	"strings"
	"testing"
	"time"

	"github.com/presence-im/presence/client"
	"github.com/presence-im/presence/messages"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/protobuf/proto"
)

// A heartbeat is acked unless it says ack false, on either subprotocol and
// on both decoding paths of JSON (the fast path, and protojson for a shape
// it leaves alone); a connection that never asks stays alive past stale
// many times over, its heartbeats still its sign of life, and nothing is
// written back to it. presence_heartbeat_acks_total counts the acks,
// presence_heartbeat_processing_seconds times every heartbeat.
func TestHeartbeatAckOnRequest(t *testing.T) {
	nd := startNode(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, c := range []struct {
		name, sub string
		beat      func(c *client.Conn, seq uint64, ack *bool) error
	}{
		{"json", client.ProtoJSON, func(c *client.Conn, seq uint64, ack *bool) error {
			if ack == nil {
				return c.Heartbeat(ctx, seq)
			}
			return c.HeartbeatAsk(ctx, seq, *ack)
		}},
		{"json through protojson", client.ProtoJSON, func(c *client.Conn, seq uint64, ack *bool) error {
			field := "" // the JSON name clientTsMs is protojson's alone
			if ack != nil {
				field = fmt.Sprintf(`,"ack":%v`, *ack)
			}
			return c.SendRaw(ctx, false, fmt.Appendf(nil, `{"heartbeat":{"seq":"%d","clientTsMs":"1"%s}}`, seq, field))
		}},
		{"binary", client.ProtoBinary, func(c *client.Conn, seq uint64, ack *bool) error {
			return c.Send(ctx, &messages.Frame{Kind: &messages.Frame_Heartbeat{Heartbeat: &messages.Heartbeat{Seq: seq, Ack: ack}}})
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			user := "u" + strings.ReplaceAll(c.name, " ", "")
			conn := nd.dial(user, "phone", 1, c.sub)
			before := testutil.ToFloat64(nd.srv.metrics.acks)
			timed, _ := beatsTimed(t, nd)
			seq := uint64(0)
			beat := func(ack *bool) {
				seq++
				if err := c.beat(conn, seq, ack); err != nil {
					t.Fatal(err)
				}
			}
			beat(nil)
			if got := nextAck(t, conn); got != seq {
				t.Fatalf("a heartbeat without the field: ack of %d, want %d", got, seq)
			}
			// Beats that ask for none, every half interval for three times
			// stale: no close, and the first frame after them is the ack
			// of the one that asks.
			for end := time.Now().Add(3 * nd.timing.Stale); time.Now().Before(end); time.Sleep(nd.timing.Heartbeat / 2) {
				beat(proto.Bool(false))
			}
			if len(nd.route(user)) != 1 {
				t.Fatalf("a device that never asked for an ack is not online: %v", nd.route(user))
			}
			beat(proto.Bool(true))
			if got := nextAck(t, conn); got != seq {
				t.Fatalf("first ack after heartbeats with ack false is of %d, want %d (the one with ack true)", got, seq)
			}
			if got := testutil.ToFloat64(nd.srv.metrics.acks) - before; got != 2 {
				t.Fatalf("presence_heartbeat_acks_total grew by %v, want 2 of %d heartbeats", got, seq)
			}
			eventually(t, time.Second, "every heartbeat timed", func() bool {
				n, _ := beatsTimed(t, nd)
				return n-timed == seq
			})
			if n, _ := beatsTimed(t, nd); n-timed != seq {
				t.Fatalf("presence_heartbeat_processing_seconds counted %d heartbeats, want %d", n-timed, seq)
			}
		})
	}
}

// beatsTimed is presence_heartbeat_processing_seconds' count and sum.
func beatsTimed(t *testing.T, nd *node) (uint64, float64) {
	t.Helper()
	var m dto.Metric
	if err := nd.srv.metrics.beatTime.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum()
}

// A heartbeat's time counts from the read that carried it, not from its
// handling: what the poller did with the read before it (the frame's
// parse, frames before it in the same read) is in it.
func TestHeartbeatTimedFromItsRead(t *testing.T) {
	s := &Server{metrics: newMetrics(nil, func() int { return 0 })}
	sock := &socket{s: s, codec: jsonCodec}
	sock.readAt.Store(int64(time.Since(monoEpoch) - 3*time.Millisecond))
	if d := sock.sinceRead(); d < 3*time.Millisecond || d > time.Minute {
		t.Fatalf("sinceRead %v, want at least the 3ms since the read", d)
	}
}

// nextAck reads the next frame, which must be a heartbeat ack, and returns
// its seq.
func nextAck(t *testing.T, c *client.Conn) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	f, err := c.Next(ctx)
	if err != nil || f.GetHeartbeatAck() == nil {
		t.Fatalf("next frame %v, %v: want a heartbeat ack", f, err)
	}
	return f.GetHeartbeatAck().GetSeq()
}
