package source

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gazconsumer/gazconsumer/devstack/devstacktest"
	"github.com/gazconsumer/gazconsumer/specs"
	"go.gazette.dev/core/broker/client"
	pb "go.gazette.dev/core/broker/protocol"
	"go.gazette.dev/core/message"
)

// fixedMsg is a protobuf-framed message whose payload is an 8-byte number.
type fixedMsg struct{ N uint64 }

func (m *fixedMsg) GetUUID() message.UUID                         { return message.UUID{} }
func (m *fixedMsg) SetUUID(message.UUID)                          {}
func (m *fixedMsg) NewAcknowledgement(pb.Journal) message.Message { return new(fixedMsg) }
func (m *fixedMsg) ProtoSize() int                                { return 8 }
func (m *fixedMsg) MarshalTo(b []byte) (int, error) {
	return len(binary.LittleEndian.AppendUint64(b[:0], m.N)), nil
}
func (m *fixedMsg) Unmarshal(b []byte) error {
	if len(b) != 8 {
		return fmt.Errorf("payload of %d bytes, not 8", len(b))
	}
	m.N = binary.LittleEndian.Uint64(b)
	return nil
}

var fixedRuns atomic.Int32

// A source read in protobuf fixed framing tells undecodable messages, with
// their offsets and content, from the messages around them; where a frame
// header is garbled, it resumes at the next frame.
func TestSourceIterSeparatesUndecodableFrames(t *testing.T) {
	var ctx, cancel = context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var stack = testStack
	var journal = fixedJournal(t, ctx)

	var good = func(n uint64) []byte { return frame(binary.LittleEndian.AppendUint64(nil, n)) }
	var content bytes.Buffer
	content.Write(good(1))           // [0, 16)
	content.Write(frame([]byte{7}))  // [16, 25): an undecodable payload.
	content.Write([]byte("garbage")) // [25, 32): no frame header.
	content.Write(good(2))           // [32, 48)
	if _, err := client.Append(ctx, stack.Journals(), pb.AppendRequest{Journal: journal}, bytes.NewReader(content.Bytes())); err != nil {
		t.Fatal(err)
	}

	var it = NewIter(client.NewRetryReader(ctx, stack.Journals(), pb.ReadRequest{Journal: journal, EndOffset: 48}),
		func(*pb.JournalSpec) (message.Message, error) { return new(fixedMsg), nil }, DefaultMaxMessageSize)
	var got []string
	for {
		var env, undecodable, err = it.Read()
		if errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		switch {
		case undecodable != nil && errors.Is(undecodable, message.ErrDesyncDetected):
			got = append(got, fmt.Sprintf("desync at [%d,%d) %x", undecodable.Begin, undecodable.End, undecodable.Content))
		case undecodable != nil:
			got = append(got, fmt.Sprintf("undecodable [%d,%d) %x: %v", env.Begin, env.End, undecodable.Content, undecodable.Err))
		default:
			got = append(got, fmt.Sprintf("message %d at [%d,%d)", env.Message.(*fixedMsg).N, env.Begin, env.End))
		}
	}
	var want = []string{
		"message 1 at [0,16)",
		"undecodable [16,25) 07: payload of 1 bytes, not 8",
		"desync at [25,32) 67617262616765",
		"message 2 at [32,48)",
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("read\n%q\nwant\n%q", got, want)
	}

	// Replays pass over what they cannot decode.
	var replay = NewIter(client.NewRetryReader(ctx, stack.Journals(), pb.ReadRequest{Journal: journal, EndOffset: 48}),
		func(*pb.JournalSpec) (message.Message, error) { return new(fixedMsg), nil }, DefaultMaxMessageSize)
	var ns []uint64
	for {
		var env, err = replay.Next()
		if errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		ns = append(ns, env.Message.(*fixedMsg).N)
	}
	if fmt.Sprint(ns) != "[1 2]" {
		t.Fatalf("replayed %v", ns)
	}
}

// A frame header claiming more than the largest message read is undecodable
// content, from the header to the next frame header: the frames after it
// are read, whether they were appended with it or later, rather than
// swallowed into a frame that would never end.
func TestSourceIterRefusesOverlongFrames(t *testing.T) {
	var ctx, cancel = context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var stack = testStack
	var journal = fixedJournal(t, ctx)
	var good = func(n uint64) []byte {
		var b = append([]byte(nil), message.FixedFrameWord[:]...)
		b = binary.LittleEndian.AppendUint32(b, 8)
		return binary.LittleEndian.AppendUint64(b, n)
	}
	var bogus = append(append([]byte(nil), message.FixedFrameWord[:]...), binary.LittleEndian.AppendUint32(nil, 1_000_000)...)
	bogus = append(bogus, "12345"...)
	var appendBytes = func(b ...[]byte) {
		if _, err := client.Append(ctx, stack.Journals(), pb.AppendRequest{Journal: journal}, bytes.NewReader(bytes.Join(b, nil))); err != nil {
			t.Fatal(err)
		}
	}
	appendBytes(good(1), bogus, good(2)) // [0,16) [16,29) [29,45)
	appendBytes(bogus)                   // [45,58): the next frame is yet to come.

	var it = NewIter(client.NewRetryReader(ctx, stack.Journals(), pb.ReadRequest{Journal: journal, Block: true}),
		func(*pb.JournalSpec) (message.Message, error) { return new(fixedMsg), nil }, 1024)
	var got []string
	var read = func() {
		var env, undecodable, err = it.Read()
		switch {
		case err != nil:
			t.Fatal(err)
		case undecodable != nil:
			got = append(got, fmt.Sprintf("undecodable [%d,%d) %q: %v", undecodable.Begin, undecodable.End, undecodable.Content, undecodable.Err))
		default:
			got = append(got, fmt.Sprintf("message %d at [%d,%d)", env.Message.(*fixedMsg).N, env.Begin, env.End))
		}
	}
	for range 4 {
		read()
	}
	appendBytes(good(3)) // [58,74)
	read()
	var claim = "frame header claims 1000000 bytes, more than the largest message read (1024 bytes; shard label " + LabelMaxMessageSize + ")"
	var want = []string{
		"message 1 at [0,16)",
		fmt.Sprintf("undecodable [16,29) %q: %s", bogus, claim),
		"message 2 at [29,45)",
		fmt.Sprintf("undecodable [45,58) %q: %s", bogus, claim),
		"message 3 at [58,74)",
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("read\n%q\nwant\n%q", got, want)
	}
}

// fixedJournal creates a new journal of protobuf fixed frames on the test
// stack, and returns its name.
func fixedJournal(t *testing.T, ctx context.Context) pb.Journal {
	t.Helper()
	var name = fmt.Sprintf("fixed-%d", fixedRuns.Add(1))
	if _, err := specs.ApplyJournals(ctx, testStack.Journals(), "fixed journals",
		[]byte(devstacktest.Journals(name, 1, 1<<20, "content-type=application/x-protobuf-fixed"))); err != nil {
		t.Fatal(err)
	}
	return pb.Journal(name + "/00")
}

// frame returns payload in a protobuf fixed frame.
func frame(payload []byte) []byte {
	var b = append([]byte(nil), message.FixedFrameWord[:]...)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(payload)))
	return append(b, payload...)
}
