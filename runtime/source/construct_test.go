package source

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/gazconsumer/gazconsumer/runtime"
	"go.gazette.dev/core/broker/client"
	pb "go.gazette.dev/core/broker/protocol"
	"go.gazette.dev/core/message"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// protoMsg is a protobuf journal message (a number), as generated ones are.
type protoMsg struct{ *wrapperspb.UInt64Value }

func newProtoMsg() message.Message                             { return protoMsg{new(wrapperspb.UInt64Value)} }
func (protoMsg) GetUUID() message.UUID                         { return message.UUID{} }
func (protoMsg) SetUUID(message.UUID)                          {}
func (protoMsg) NewAcknowledgement(pb.Journal) message.Message { return newProtoMsg() }
func (m protoMsg) ProtoSize() int                              { return proto.Size(m.UInt64Value) }
func (m protoMsg) MarshalTo(b []byte) (int, error) {
	return copy(b, must(proto.Marshal(m.UInt64Value))), nil
}
func (m protoMsg) Unmarshal(b []byte) error { return proto.Unmarshal(b, m.UInt64Value) }
func must(b []byte, err error) []byte       { return b }

// constructorApp is a runtime.MessageConstructor of protoMsg, and counts
// the calls of NewMessage, which a source iterator should not make.
type constructorApp struct {
	runtime.Application
	resolved, newMessages int
	fail                  error
}

func (a *constructorApp) NewMessage(*pb.JournalSpec) (message.Message, error) {
	a.newMessages++
	return newProtoMsg(), nil
}

func (a *constructorApp) MessageConstructor(*pb.JournalSpec) (func() message.Message, error) {
	a.resolved++
	return newProtoMsg, a.fail
}

// A source of an application which resolves its messages' constructor does
// so once, decodes each message (new) without NewMessage, and tells an
// undecodable one from the others; a constructor that can't be resolved
// ends reading with its error.
func TestSourceIterResolvesConstructorOnce(t *testing.T) {
	var ctx, cancel = context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var journal = fixedJournal(t, ctx)
	var content bytes.Buffer
	for _, n := range []uint64{7, 0, 300} {
		content.Write(frame(must(proto.Marshal(wrapperspb.UInt64(n)))))
	}
	content.Write(frame([]byte{0x08})) // A varint field without its value.
	content.Write(frame(must(proto.Marshal(wrapperspb.UInt64(9)))))
	if _, err := client.Append(ctx, testStack.Journals(), pb.AppendRequest{Journal: journal}, bytes.NewReader(content.Bytes())); err != nil {
		t.Fatal(err)
	}
	var read = func(app *constructorApp) ([]string, error) {
		var it = NewAppIter(client.NewRetryReader(ctx, testStack.Journals(),
			pb.ReadRequest{Journal: journal, EndOffset: int64(content.Len())}), app, DefaultMaxMessageSize)
		var got []string
		for {
			var env, undecodable, err = it.Read()
			if errors.Is(err, io.EOF) {
				return got, nil
			} else if err != nil {
				return got, err
			} else if undecodable != nil {
				got = append(got, fmt.Sprintf("undecodable at %d", env.Begin))
			} else {
				got = append(got, fmt.Sprint(env.Message.(protoMsg).GetValue()))
			}
		}
	}
	var app = new(constructorApp)
	var got, err = read(app)
	if err != nil {
		t.Fatal(err)
	} else if want := "[7 0 300 undecodable at 29 9]"; fmt.Sprint(got) != want {
		t.Fatalf("read %v, want %s", got, want)
	} else if app.resolved != 1 || app.newMessages != 0 {
		t.Fatalf("constructor resolved %d times and NewMessage called %d times, want 1 and 0", app.resolved, app.newMessages)
	}
	app = &constructorApp{fail: errors.New("journal x names no journal message")}
	if _, err = read(app); err == nil || !strings.Contains(err.Error(), "names no journal message") {
		t.Fatalf("reading with a constructor that fails: %v", err)
	}
}
