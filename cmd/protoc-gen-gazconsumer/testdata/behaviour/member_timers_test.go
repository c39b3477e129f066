package acmev1_test

// This test is copied next to the generated acme/v1 package by
// TestBuildGoldens. It runs consumer SpendCounter as a member on real etcd
// and brokers, whose Reminder timers fire by the member's wall clock, each
// once, through the member's stop and another's recovery of the shard.

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	acmev1 "example.test/golden/acme/v1"

	"github.com/gazconsumer/gazconsumer/devstack"
	"github.com/gazconsumer/gazconsumer/runtime"
	"github.com/gazconsumer/gazconsumer/runtime/replica"
	"github.com/gazconsumer/gazconsumer/runtime/service"
	"github.com/gazconsumer/gazconsumer/specs"
	"github.com/gazconsumer/gazconsumer/store/rocks"
	"go.gazette.dev/core/auth"
	"go.gazette.dev/core/broker/client"
	pb "go.gazette.dev/core/broker/protocol"
	pc "go.gazette.dev/core/consumer/protocol"
	"go.gazette.dev/core/message"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// wallReminder sets a Reminder 300ms after each order of its customer, and
// publishes a total of minus the order's cents when it fires.
type wallReminder struct{ spender }

func (wallReminder) OnOrder(tx *acmev1.SpendCounterTxn, msg *acmev1.Order) error {
	return tx.ReminderTimers.SetAfter(&acmev1.Reminder{CustomerId: msg.CustomerId, Cents: msg.Items[0].Cents}, 300*time.Millisecond)
}

func (wallReminder) OnReminder(tx *acmev1.SpendCounterTxn, msg *acmev1.Reminder) error {
	return tx.PublishTotal(&acmev1.Total{CustomerId: msg.CustomerId, Cents: -msg.Cents})
}

func TestTimersFireOnAMember(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := devstack.Start(ctx, devstack.Options{Dir: t.TempDir(), Brokers: 1, UnsafeNoFsync: true, LogLevel: slog.LevelWarn})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := specs.ApplyJournals(ctx, s.Journals(), "journals.yaml", []byte(unfilledJournalsYAML)); err != nil {
		t.Fatal(err)
	}
	lister := runtime.PartitionListerFunc(func(sel pb.LabelSelector) message.PartitionsFunc {
		resp, err := client.ListAllJournals(ctx, s.Journals(), pb.ListRequest{Selector: sel})
		if err != nil {
			t.Fatalf("listing %s: %v", sel, err)
		}
		return func() *pb.ListResponse { return resp }
	})
	stateDir := t.TempDir()
	startMember := func(id string) (*service.Service, func()) {
		app, err := acmev1.NewSpendCounterApplication(wallReminder{}, rocks.Opener{}, lister)
		if err != nil {
			t.Fatal(err)
		}
		svc, err := service.New(service.Config{
			App: app, Etcd: s.Etcd(), Prefix: "/gazette/consumers/reminders", Journals: s.Journals(),
			ID: id, LeaseTTL: 3 * time.Second, Replicas: replica.Config{StateDir: stateDir, HintsInterval: 100 * time.Millisecond},
		})
		if err != nil {
			t.Fatal(err)
		}
		runCtx, stop := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- svc.Run(runCtx, 10*time.Second) }()
		var once bool
		return svc, func() {
			if !once {
				once = true
				stop()
				if err := <-done; err != nil {
					t.Errorf("member %s: %v", id, err)
				}
			}
		}
	}
	m1, stop1 := startMember("member-1")
	defer stop1()
	conn, err := grpc.NewClient(m1.Endpoint().GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	shards := pc.NewAuthShardClient(pc.NewShardClient(conn), auth.NewNoopAuth())
	spec := &pc.ShardSpec{
		Id:                "spendcounter-000",
		Sources:           []pc.ShardSpec_Source{{Journal: "acme/orders/part-000"}},
		RecoveryLogPrefix: "acme/recovery",
		HintPrefix:        "/gazette/hints/acme",
		HintBackups:       1,
		MinTxnDuration:    time.Millisecond,
		MaxTxnDuration:    100 * time.Millisecond,
	}
	if resp, err := shards.Apply(ctx, &pc.ApplyRequest{Changes: []pc.ApplyRequest_Change{{Upsert: spec}}}); err != nil || resp.Status != pc.Status_OK {
		t.Fatalf("applying the shard: %v %v", resp, err)
	}

	ajc := client.NewAppendService(ctx, s.Journals())
	pub := message.NewPublisher(ajc, nil)
	toOrders := func(message.Mappable) (pb.Journal, string, error) {
		return "acme/orders/part-000", "application/x-protobuf-fixed", nil
	}
	order := func(customer string, cents int64) {
		t.Helper()
		aa, err := pub.PublishCommitted(toOrders, &acmev1.Order{CustomerId: customer, Items: []*acmev1.Order_Item{{Cents: cents}}})
		if err == nil {
			err = aa.Err()
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	// reminders reads the totals published, read-committed, until it has
	// read want of them, and returns them; then it reads on for a while
	// (wait), to find any more.
	reminders := func(want int, wait time.Duration) []string {
		t.Helper()
		readCtx, stop := context.WithTimeout(ctx, time.Minute)
		defer stop()
		rr := client.NewRetryReader(readCtx, s.Journals(), pb.ReadRequest{Journal: "acme/totals/part-000", Block: true})
		it := message.NewReadCommittedIter(rr, func(*pb.JournalSpec) (message.Message, error) { return new(acmev1.Total), nil },
			message.NewSequencer(nil, nil, 1024))
		var got []string
		var deadline <-chan time.Time
		for {
			env, err := it.Next()
			if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) || errors.Is(err, io.EOF) {
				return got
			} else if err != nil {
				t.Fatal(err)
			}
			if message.GetFlags(env.Message.GetUUID()) == message.Flag_ACK_TXN {
				continue
			}
			tot := env.Message.(*acmev1.Total)
			got = append(got, tot.CustomerId)
			if len(got) == want && deadline == nil {
				deadline = time.After(wait)
				go func() { <-deadline; stop() }()
			}
		}
	}

	order("ann", 100)
	order("bob", 50)
	if got := reminders(2, 2*time.Second); len(got) != 2 {
		t.Fatalf("reminders %v, want ann's and bob's once each", got)
	}
	// The shard moves to another member, which recovers it: the reminders
	// fired are not fired again; one set before the move fires after it.
	order("cyd", 7)
	m2, stop2 := startMember("member-2")
	defer stop2()
	_ = m2
	stop1()
	if got := reminders(3, 2*time.Second); len(got) != 3 || got[2] != "cyd" {
		t.Fatalf("reminders %v, want ann's, bob's and cyd's once each", got)
	}
}
