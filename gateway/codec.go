package gateway

import (
	"strings"
	"sync/atomic"
	"unicode/utf8"

	"github.com/lesismal/nbio/nbhttp/websocket"
	"github.com/presence-im/presence/messages"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// Subprotocols of the device WebSocket; both carry messages.Frame.
const (
	ProtoJSON   = "presence.v1.json"  // text frames, protojson with proto field names
	ProtoBinary = "presence.v1.proto" // binary frames, protobuf
)

// codec encodes frames for one subprotocol.
type codec struct {
	name string
	kind websocket.MessageType
	last *lastPresence
}

var (
	jsonCodec   = codec{ProtoJSON, websocket.TextMessage, &lastPresence{}}
	binaryCodec = codec{ProtoBinary, websocket.BinaryMessage, &lastPresence{}}

	jsonOut = protojson.MarshalOptions{UseProtoNames: true}
	jsonIn  = protojson.UnmarshalOptions{DiscardUnknown: true}
)

func (c codec) marshal(f *messages.Frame) ([]byte, error) {
	if c.kind == websocket.TextMessage {
		return jsonOut.Marshal(f)
	}
	return proto.Marshal(f)
}

// lastPresence is the last presence event a subprotocol encoded. A view
// sends one read-only Presence to all of a node's subscribers it trims
// alike (docs/architecture.md, the message flows), so the first of their sockets
// encodes the frame and the others reuse the bytes: one encoding per event,
// trim and subprotocol instead of one per subscriber. The entry holds its
// Presence, so the pointer cannot be reused for another while it is kept;
// nbio copies what it writes, so the bytes are shared read-only.
type lastPresence struct {
	p atomic.Pointer[encodedPresence]
}

type encodedPresence struct {
	presence *messages.Presence
	b        []byte
}

// encode is marshal, reusing the last presence frame's bytes when f carries
// the same Presence.
func (c codec) encode(f *messages.Frame) ([]byte, error) {
	p := f.GetPresence()
	if p == nil {
		return c.marshal(f)
	}
	if e := c.last.p.Load(); e != nil && e.presence == p {
		return e.b, nil
	}
	b, err := c.marshal(f)
	if err == nil {
		c.last.p.Store(&encodedPresence{p, b})
	}
	return b, err
}

func (c codec) unmarshal(b []byte, f *messages.Frame) error {
	if c.kind == websocket.TextMessage {
		return jsonIn.Unmarshal(b, f)
	}
	return proto.Unmarshal(b, f)
}

// DecodeFrame decodes one client message of a subprotocol (exported for the
// fuzz target and the client SDK's tests).
func DecodeFrame(subprotocol string, b []byte) (*messages.Frame, error) {
	c := jsonCodec
	if subprotocol == ProtoBinary {
		c = binaryCodec
	}
	f := &messages.Frame{}
	return f, c.unmarshal(b, f)
}

// invalidUTF8 names the rule a binary frame broke if it holds a string
// field that is not UTF-8, as "set_status: text is not valid UTF-8":
// protobuf's decode error says only "string field contains invalid
// UTF-8". False for a text frame (its bytes are checked whole: 1007) and
// for a frame without such a field.
func invalidUTF8(c codec, b []byte) (string, bool) {
	if c.kind != websocket.BinaryMessage {
		return "", false
	}
	path := badString(b, (&messages.Frame{}).ProtoReflect().Descriptor())
	if len(path) == 0 {
		return "", false
	}
	if len(path) == 1 {
		return path[0] + " is not valid UTF-8", true
	}
	return path[0] + ": " + strings.Join(path[1:], ".") + " is not valid UTF-8", true
}

// badString is the path of field names, from md down, to the first string
// field of b (wire format of md) that is not UTF-8; nil if none is, or b
// is not well-formed up to one.
func badString(b []byte, md protoreflect.MessageDescriptor) []string {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil
		}
		b = b[n:]
		m := protowire.ConsumeFieldValue(num, typ, b)
		if m < 0 {
			return nil
		}
		fd := md.Fields().ByNumber(num)
		if typ == protowire.BytesType && fd != nil {
			v, _ := protowire.ConsumeBytes(b)
			switch {
			case fd.Kind() == protoreflect.StringKind && !utf8.Valid(v):
				return []string{string(fd.Name())}
			case fd.Kind() == protoreflect.MessageKind:
				if sub := badString(v, fd.Message()); sub != nil {
					return append([]string{string(fd.Name())}, sub...)
				}
			}
		}
		b = b[m:]
	}
	return nil
}
