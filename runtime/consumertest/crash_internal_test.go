package consumertest

import (
	"errors"
	"io"
	"reflect"
	"testing"

	"github.com/gazconsumer/gazconsumer/runtime"
	"github.com/gazconsumer/gazconsumer/store/mem"
	pb "go.gazette.dev/core/broker/protocol"
	"go.gazette.dev/core/labels"
	"go.gazette.dev/core/message"
)

// note is a journal message of a JSON string.
type note struct {
	UUID message.UUID
	Text string
}

func (m *note) GetUUID() message.UUID                         { return m.UUID }
func (m *note) SetUUID(u message.UUID)                        { m.UUID = u }
func (m *note) NewAcknowledgement(pb.Journal) message.Message { return new(note) }

// echo publishes each note it reads onward.
type echo struct {
	stores runtime.StoreOpener
	out    message.MappingFunc
}

func (e *echo) NewStore(s runtime.Shard, r runtime.Recorder) (runtime.Store, error) {
	return e.stores.OpenStore(s, r)
}
func (e *echo) NewMessage(*pb.JournalSpec) (message.Message, error) { return new(note), nil }
func (e *echo) ConsumeMessage(_ runtime.Shard, _ runtime.Store, env message.Envelope, pub *message.Publisher) error {
	_, err := pub.PublishUncommitted(e.out, &note{Text: env.Message.(*note).Text})
	return err
}
func (e *echo) FinalizeTxn(runtime.Shard, runtime.Store, *message.Publisher) error { return nil }

// The messages a crashed transaction published are in its output journals,
// appended before the crash, but never acknowledged: readers never read
// them, and the replay publishes them again, once.
func TestCrashedTransactionPublishedUncommitted(t *testing.T) {
	var app = new(echo)
	var h = New(t, Consumer{
		Name: "test.Echo",
		NewApplication: func(stores runtime.StoreOpener, journals runtime.PartitionLister) (runtime.Application, error) {
			app.stores = stores
			app.out = message.RandomMapping(journals.Partitions(pb.MustLabelSelector("app.gazette.dev/message-type=test.Out")))
			return app, nil
		},
		Inputs: []Input{{New: func() message.Message { return new(note) }, MessageType: "test.In", ContentType: labels.ContentType_JSONLines}},
		Outputs: []Output{{New: func() message.Message { return new(note) }, MessageType: "test.Out",
			ContentType: labels.ContentType_JSONLines, Selector: "app.gazette.dev/message-type=test.Out"}},
	}, Partitions(1))
	var out = h.outputs[reflect.TypeFor[*note]()].partitions[0]

	h.Feed(&note{Text: "one"})
	h.Commit()
	h.Feed(&note{Text: "two"})
	h.Crash()
	if got := texts(t, h, out); len(got) != 2 || got[1] != "two" {
		t.Fatalf("the output journal holds %q: not the crashed transaction's message", got)
	}
	if _, ok := h.shard.store.(*mem.Store); !ok {
		t.Fatalf("the shard's store is a %T", h.shard.store)
	}
	h.Commit()
	if got := texts(t, h, out); len(got) != 3 || got[2] != "two" {
		t.Fatalf("the output journal holds %q after the replay", got)
	}
	var committed, err = h.committed(out, func() message.Message { return new(note) })
	if err != nil {
		t.Fatal(err)
	}
	var read []string
	for _, env := range committed {
		read = append(read, env.Message.(*note).Text)
	}
	if len(read) != 2 || read[0] != "one" || read[1] != "two" {
		t.Fatalf("readers read %q, want [one two]", read)
	}
}

// texts returns the texts of every message of journal, acknowledgements
// aside, committed or not.
func texts(t *testing.T, h *Harness, journal pb.Journal) []string {
	var r, err = h.journals.newReader(journal, 0, -1, func(*pb.JournalSpec) (message.Message, error) { return new(note), nil })
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for {
		var env, err = r.next()
		if errors.Is(err, io.EOF) {
			return out
		} else if err != nil {
			t.Fatal(err)
		}
		if message.GetFlags(env.Message.GetUUID()) != message.Flag_ACK_TXN {
			out = append(out, env.Message.(*note).Text)
		}
	}
}
