package codec

import (
	"bufio"
	"bytes"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

func TestMarshalTo(t *testing.T) {
	var m = wrapperspb.String("hello")
	var want, _ = proto.Marshal(m)
	var b = make([]byte, Size(m))
	if n, err := MarshalTo(b, m); err != nil || n != len(want) || !bytes.Equal(b, want) {
		t.Fatalf("MarshalTo = %d, %v: %x; want %x", n, err, b, want)
	}
	// A buffer of another size than the encoding's, as of a message
	// modified since its size was taken, is an error.
	if _, err := MarshalTo(make([]byte, len(want)+1), m); err == nil || !strings.Contains(err.Error(), "marshaling google.protobuf.StringValue: encoding is 7 bytes, not the 8 of ProtoSize") {
		t.Errorf("MarshalTo into a larger buffer: %v", err)
	}
}

func TestMarshalJSONTo(t *testing.T) {
	var m = wrapperspb.Int64(42)
	var buf bytes.Buffer
	var w = bufio.NewWriter(&buf)
	var n, err = MarshalJSONTo(w, m)
	if err != nil {
		t.Fatal(err)
	}
	_ = w.Flush()
	if n != buf.Len() || !strings.HasSuffix(buf.String(), "\n") || strings.Count(buf.String(), "\n") != 1 {
		t.Fatalf("MarshalJSONTo wrote %q, returning %d", buf.String(), n)
	}
	var back wrapperspb.Int64Value
	if err = protojson.Unmarshal(buf.Bytes(), &back); err != nil || back.Value != 42 {
		t.Errorf("read back %v, %v", &back, err)
	}
}
