package brokerconn

import (
	"bytes"
	"testing"

	pb "go.gazette.dev/core/broker/protocol"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// marshal marshals v with codec, and returns its bytes, freeing the
// buffers (so that the next marshal may reuse them, dirty).
func marshal(t testing.TB, v any) []byte {
	t.Helper()
	var bs, err = codec{}.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	defer bs.Free()
	return bs.Materialize()
}

// checkAppend fails t unless codec marshals an append of content to
// journal as gogo's Marshal does, and unmarshals it back.
func checkAppend(t testing.TB, journal pb.Journal, content []byte) {
	t.Helper()
	var req = &pb.AppendRequest{Journal: journal, Content: content}
	var want, err = req.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	var got = marshal(t, req)
	if !bytes.Equal(got, want) {
		t.Fatalf("marshaled %d bytes unlike gogo's %d (journal %q, %d bytes of content)", len(got), len(want), journal, len(content))
	}
	var back pb.AppendRequest
	if err = (codec{}).Unmarshal(mem.BufferSlice{mem.SliceBuffer(got)}, &back); err != nil {
		t.Fatal(err)
	} else if back.Journal != journal || !bytes.Equal(back.Content, content) {
		t.Fatalf("unmarshaled journal %q and %d bytes, want %q and %d", back.Journal, len(back.Content), journal, len(content))
	}
}

// Gazette's messages marshal as gogo marshals them, small or pooled, into
// buffers reused without being cleared: a shorter message after a longer
// one leaves none of the longer's bytes in its own.
func TestCodecMarshalsAsGogo(t *testing.T) {
	for _, n := range []int{0, 1, 100, 1 << 10, 32 << 10, 32<<10 + 1, 1 << 20, 1<<24 + 5} {
		checkAppend(t, "a/journal", bytes.Repeat([]byte{0xff}, n))
		checkAppend(t, "b", bytes.Repeat([]byte{0x01}, n-n/8)) // Of the same buffers.
	}
}

// Messages other than Gazette's marshal as gRPC's codec marshals them.
func TestCodecFallsBack(t *testing.T) {
	var m = wrapperspb.String("a string")
	var want, err = proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if got := marshal(t, m); !bytes.Equal(got, want) {
		t.Fatalf("marshaled %x, want %x", got, want)
	}
}

// The pool's buffers are of the power of two of their length (at least
// 1 << minPooled), up to 1 << maxPooled; longer ones are of their length.
func TestDirtyPoolSizes(t *testing.T) {
	var p dirtyPool
	for _, c := range []struct{ n, cap int }{
		{1, 1 << minPooled}, {1 << minPooled, 1 << minPooled}, {1<<minPooled + 1, 2 << minPooled},
		{1 << maxPooled, 1 << maxPooled}, {1<<maxPooled + 1, 1<<maxPooled + 1},
	} {
		var b = p.Get(c.n)
		if len(*b) != c.n || cap(*b) != c.cap {
			t.Errorf("Get(%d): length %d, capacity %d; want capacity %d", c.n, len(*b), cap(*b), c.cap)
		}
		p.Put(b)
	}
}

// FuzzCodec checks that whatever an append holds, codec marshals it as gogo
// does.
func FuzzCodec(f *testing.F) {
	f.Add("a/journal", []byte("content"), 0)
	f.Add("", []byte{}, 40000)
	f.Fuzz(func(t *testing.T, journal string, content []byte, pad int) {
		if pad < 0 || pad > 1<<21 {
			return
		}
		checkAppend(t, pb.Journal(journal), append(content, make([]byte, pad)...))
	})
}

// BenchmarkMarshalAppend marshals appends of 32 KiB, as a recovery log's
// are, with codec and with gRPC's protobuf codec, freeing each as its
// connection would once written.
func BenchmarkMarshalAppend(b *testing.B) {
	var req = &pb.AppendRequest{Journal: "a/recovery/log", Content: bytes.Repeat([]byte{1}, 32<<10)}
	for _, c := range []struct {
		name  string
		codec interface {
			Marshal(any) (mem.BufferSlice, error)
		}
	}{{"gazconsumer", codec{}}, {"grpc", encoding.GetCodecV2("proto")}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(req.Content)))
			for b.Loop() {
				var bs, err = c.codec.Marshal(req)
				if err != nil {
					b.Fatal(err)
				}
				bs.Free()
			}
		})
	}
}
