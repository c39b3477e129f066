package acmev1

// This test is copied next to the generated acme/v1 package by
// TestBuildGoldens. It runs a generated consumer's handler against real
// brokers: totals it publishes are read back both by gazctl and by Gazette's
// committed reader through the generated NewMessage.

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"sort"
	"testing"
	"time"

	"github.com/gazconsumer/gazconsumer/devstack"
	"github.com/gazconsumer/gazconsumer/runtime"
	"github.com/gazconsumer/gazconsumer/specs"
	"go.gazette.dev/core/broker/client"
	pb "go.gazette.dev/core/broker/protocol"
	"go.gazette.dev/core/message"
	"google.golang.org/protobuf/encoding/protojson"
)

type publishingHandler struct{}

func (publishingHandler) OnReminder(*SpendCounterTxn, *Reminder) error {
	return errors.New("no reminder was set")
}

func (publishingHandler) OnOrder(tx *SpendCounterTxn, msg *Order) error {
	var cents int64
	for _, it := range msg.Items {
		cents += it.Cents
	}
	return tx.PublishTotal(&Total{CustomerId: msg.CustomerId, Day: msg.PlacedAt, Cents: cents})
}

func (publishingHandler) FinalizeTxn(*SpendCounterTxn) error { return nil }

const totalsYAML = `
name: acme/totals/
replication: 1
labels:
  - name: app.gazette.dev/message-type
    value: acme.totals
  - name: content-type
    value: application/x-ndjson
fragment:
  length: 1048576
  stores: [file:///]
  refresh_interval: 1s
  compression_codec: NONE
children:
  - name: acme/totals/part-000
  - name: acme/totals/part-001
`

func TestPublishReadBack(t *testing.T) {
	gazctl := os.Getenv("GAZCTL")
	if gazctl == "" {
		t.Fatal("GAZCTL must name the gazctl binary")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	s, err := devstack.Start(ctx, devstack.Options{Dir: t.TempDir(), Brokers: 1, UnsafeNoFsync: true, LogLevel: slog.LevelWarn})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := specs.ApplyJournals(ctx, s.Journals(), "totals.yaml", []byte(totalsYAML)); err != nil {
		t.Fatal(err)
	}

	lister := runtime.PartitionListerFunc(func(sel pb.LabelSelector) message.PartitionsFunc {
		resp, err := client.ListAllJournals(ctx, s.Journals(), pb.ListRequest{Selector: sel})
		if err != nil {
			t.Fatalf("listing %s: %v", sel, err)
		}
		return func() *pb.ListResponse { return resp }
	})
	store := &memStore{kv: memKV{}}
	app, err := NewSpendCounterApplication(publishingHandler{}, nil, lister)
	if err != nil {
		t.Fatal(err)
	}
	ajc := client.NewAppendService(ctx, s.Journals())
	pub := message.NewPublisher(ajc, nil)

	customers := []string{"ann", "bob", "cyd", "dee", "eve", "fay"}
	orders := &pb.JournalSpec{Name: "acme/orders"}
	for i, c := range customers {
		env := message.Envelope{Journal: orders, Begin: pb.Offset(i), Message: &Order{CustomerId: c, Items: []*Order_Item{{Cents: int64(i + 1)}}, PlacedAt: ts(86400)}}
		if err := app.ConsumeMessage(fakeShard{}, store, env, pub); err != nil {
			t.Fatal(err)
		}
	}
	if err := app.FinalizeTxn(fakeShard{}, store, pub); err != nil {
		t.Fatal(err)
	}
	// Commit the transaction as the runtime does: acknowledge its messages.
	acks, err := pub.BuildAckIntents()
	if err != nil {
		t.Fatal(err)
	}
	for _, ack := range acks {
		aa := ajc.StartAppend(pb.AppendRequest{Journal: ack.Journal}, nil)
		_, _ = aa.Writer().Write(ack.Intent)
		if err := aa.Release(); err != nil {
			t.Fatal(err)
		}
	}
	for op := range ajc.PendingExcept("") {
		if err := op.Err(); err != nil {
			t.Fatalf("append: %v", err)
		}
	}

	// gazctl reads the JSON lines written by the generated framing methods.
	cmd := exec.CommandContext(ctx, gazctl, "journals", "read", "-l", "app.gazette.dev/message-type=acme.totals",
		"--broker.address", string(s.Brokers()[0].Endpoint()), "--broker.cache.size", "0")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("gazctl journals read: %v\n%s", err, stderr.String())
	}
	var got []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		var total Total
		if err := protojson.Unmarshal(sc.Bytes(), &total); err != nil {
			t.Fatalf("gazctl output line %q: %v", sc.Text(), err)
		}
		if total.GetUUID() == (message.UUID{}) {
			t.Errorf("total %v has no UUID", &total)
		}
		if message.GetFlags(total.GetUUID()) == message.Flag_ACK_TXN {
			continue
		}
		got = append(got, total.CustomerId)
	}
	sort.Strings(got)
	if len(got) != len(customers) {
		t.Fatalf("gazctl read totals of %v, want %v\n%s", got, customers, out)
	}
	for i := range got {
		if got[i] != customers[i] {
			t.Fatalf("gazctl read totals of %v, want %v", got, customers)
		}
	}

	// Gazette's committed reader decodes them through NewMessage, and totals
	// of one customer are in one partition.
	parts := map[string]pb.Journal{}
	for _, j := range []pb.Journal{"acme/totals/part-000", "acme/totals/part-001"} {
		rr := client.NewRetryReader(ctx, s.Journals(), pb.ReadRequest{Journal: j, Block: false})
		it := message.NewReadCommittedIter(rr, NewMessage, message.NewSequencer(nil, nil, 16))
		for {
			env, err := it.Next()
			if err != nil {
				break // client.ErrOffsetNotYetAvailable at the write head.
			}
			if message.GetFlags(env.GetUUID()) == message.Flag_ACK_TXN {
				continue
			}
			c := env.Message.(*Total).CustomerId
			if prev, ok := parts[c]; ok && prev != j {
				t.Errorf("totals of %s in %s and %s", c, prev, j)
			}
			parts[c] = j
		}
	}
	if len(parts) != len(customers) {
		t.Errorf("committed reader read totals of %v, want %v", parts, customers)
	}
}
