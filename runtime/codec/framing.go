package codec

import (
	"bufio"
	"fmt"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// MarshalTo writes the encoding of m into b, which holds exactly Size(m)
// bytes: the MarshalTo of a generated journal message, for Gazette's
// protobuf fixed framing.
func MarshalTo(b []byte, m proto.Message) (int, error) {
	var out, err = Append(b[:0], m)
	if err != nil {
		return 0, fmt.Errorf("marshaling %s: %w", m.ProtoReflect().Descriptor().FullName(), err)
	} else if len(out) != len(b) {
		return 0, fmt.Errorf("marshaling %s: encoding is %d bytes, not the %d of ProtoSize (was the message modified concurrently?)",
			m.ProtoReflect().Descriptor().FullName(), len(out), len(b))
	}
	return len(out), nil
}

// MarshalJSONTo writes m to w as one line of protobuf JSON: the
// MarshalJSONTo of a generated journal message, for Gazette's JSON-lines
// framing.
func MarshalJSONTo(w *bufio.Writer, m proto.Message) (int, error) {
	var b, err = protojson.Marshal(m)
	if err != nil {
		return 0, fmt.Errorf("marshaling %s to JSON: %w", m.ProtoReflect().Descriptor().FullName(), err)
	}
	return w.Write(append(b, '\n'))
}
