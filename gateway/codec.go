package gateway

import (
	"github.com/lesismal/nbio/nbhttp/websocket"
	"github.com/presence-im/presence/messages"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
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
}

var (
	jsonCodec   = codec{ProtoJSON, websocket.TextMessage}
	binaryCodec = codec{ProtoBinary, websocket.BinaryMessage}

	jsonOut = protojson.MarshalOptions{UseProtoNames: true}
	jsonIn  = protojson.UnmarshalOptions{DiscardUnknown: true}
)

func (c codec) marshal(f *messages.Frame) ([]byte, error) {
	if c.kind == websocket.TextMessage {
		return jsonOut.Marshal(f)
	}
	return proto.Marshal(f)
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
