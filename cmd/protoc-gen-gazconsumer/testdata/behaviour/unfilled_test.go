package acmev1_test

// This test is copied next to the generated acme/v1 package by
// TestBuildGoldens, beside the consumer's scaffolded handlers (package
// scaffold/spendcounter, as the plugin wrote them). It runs the scaffold,
// unfilled, as a member on real etcd and brokers: the shard must fail at the
// first message, naming the method, journal and offset, and must not
// checkpoint past it.

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	acmev1 "example.test/golden/acme/v1"
	"example.test/golden/scaffold/spendcounter"

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

const unfilledJournalsYAML = `
name: acme/
replication: 1
fragment:
  length: 1048576
  stores: [file:///]
  refresh_interval: 1s
  compression_codec: NONE
children:
  - name: acme/orders/part-000
    labels:
      - name: app.gazette.dev/message-type
        value: acme.v1.Order
      - name: content-type
        value: application/x-protobuf-fixed
  - name: acme/recovery/
    labels:
      - name: content-type
        value: application/x-gazette-recoverylog
    children:
      - name: acme/recovery/spendcounter-000
  - name: acme/totals/part-000
    labels:
      - name: app.gazette.dev/message-type
        value: acme.totals
      - name: content-type
        value: application/x-ndjson
`

func TestUnfilledHandlerFailsTheShard(t *testing.T) {
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

	// startMember starts a member running the scaffolded handler.
	stateDir := t.TempDir()
	startMember := func(id string) (*service.Service, func()) {
		app, err := acmev1.NewSpendCounterApplication(spendcounter.NewSpendCounterHandler(), rocks.Opener{}, lister)
		if err != nil {
			t.Fatal(err)
		}
		svc, err := service.New(service.Config{
			App: app, Etcd: s.Etcd(), Prefix: "/gazette/consumers/spendcounter", Journals: s.Journals(),
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

	// shardsOf returns a client of the Shard API of member svc.
	shardsOf := func(svc *service.Service) pc.ShardClient {
		conn, err := grpc.NewClient(svc.Endpoint().GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = conn.Close() })
		return pc.NewAuthShardClient(pc.NewShardClient(conn), auth.NewNoopAuth())
	}
	shards := shardsOf(m1)
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

	// Two orders, committed: the first fails the shard.
	ajc := client.NewAppendService(ctx, s.Journals())
	pub := message.NewPublisher(ajc, nil)
	toOrders := func(message.Mappable) (pb.Journal, string, error) {
		return "acme/orders/part-000", "application/x-protobuf-fixed", nil
	}
	var first pb.Offset = -1
	for _, c := range []string{"ann", "bob"} {
		aa, err := pub.PublishCommitted(toOrders, &acmev1.Order{CustomerId: c})
		if err != nil {
			t.Fatal(err)
		}
		if err := aa.Err(); err != nil {
			t.Fatal(err)
		}
		if first == -1 {
			first = aa.Response().Commit.Begin
		}
	}

	// failure waits for the shard to be FAILED on member, as listed through
	// shards, and returns its error.
	failure := func(shards pc.ShardClient, member string) string {
		for {
			resp, err := shards.List(ctx, &pc.ListRequest{})
			if err != nil {
				t.Fatal(err)
			}
			for _, sh := range resp.Shards {
				for i, st := range sh.Status {
					if st.Code == pc.ReplicaStatus_FAILED && sh.Route.Members[i].Suffix == member {
						return strings.Join(st.Errors, "; ")
					}
				}
			}
			select {
			case <-ctx.Done():
				t.Fatalf("the shard did not fail on %s: %v", member, resp.Shards)
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	want := fmt.Sprintf("shard spendcounter-000: consuming journal acme/orders/part-000 offset %d: acme.v1.SpendCounter.OnOrder: spendcounter: OnOrder is not implemented", first)
	if got := failure(shards, "member-1"); got != want {
		t.Fatalf("the failed shard's status is\n%s\nwant\n%s", got, want)
	}

	// Its checkpoint did not move past the order: the member taking the
	// shard over recovers it from the recovery log, reads from the
	// checkpoint, and fails at the same order.
	m2, stop2 := startMember("member-2")
	defer stop2()
	stop1()
	if got := failure(shardsOf(m2), "member-2"); got != want {
		t.Fatalf("after recovery, the failed shard's status is\n%s\nwant\n%s", got, want)
	}
}
