package source

import (
	"errors"
	"strings"
	"testing"

	"github.com/gazconsumer/gazconsumer/runtime"
	pb "go.gazette.dev/core/broker/protocol"
	"go.gazette.dev/core/message"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// The record of a message whose handler failed holds the handler, its
// attempts and error, and the message in compact protobuf JSON; that of an
// undecodable message, its content.
func TestRecord(t *testing.T) {
	var env = message.Envelope{Journal: &pb.JournalSpec{Name: "a/journal"}, Begin: 10, End: 20,
		Message: protoMsg{wrapperspb.UInt64(12345678901)}}
	var rec, what, err = record("shard-1", env, &runtime.HandlerError{Method: "OnOrder", Attempts: 3, Err: errors.New("broken")})
	if err != nil {
		t.Fatal(err)
	}
	if rec.Shard != "shard-1" || rec.Journal != "a/journal" || rec.Begin != 10 || rec.End != 20 || rec.Handler != "OnOrder" ||
		rec.Attempts != 3 || rec.Error != "broken" || string(rec.Message) != `"12345678901"` || rec.Content != nil {
		t.Errorf("record %+v", rec)
	}
	if !strings.Contains(what, "handler failed") {
		t.Errorf("logged as %q", what)
	}
	rec, what, err = record("shard-1", env, &DecodeError{Journal: "a/journal", Begin: 10, End: 20, Content: []byte("junk"), Err: errors.New("bad")})
	if err != nil || rec.Error != "bad" || string(rec.Content) != "junk" || rec.Handler != "" || rec.Message != nil || !strings.Contains(what, "undecodable") {
		t.Errorf("record %+v, %q, %v", rec, what, err)
	}
	if HandlerFailed(errors.New("x")) || !HandlerFailed(&runtime.HandlerError{Err: errors.New("x")}) {
		t.Error("HandlerFailed tells handler errors wrongly")
	}
}
