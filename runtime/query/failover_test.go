package query_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gazconsumer/gazconsumer/runtime/groupkeys"
	"github.com/gazconsumer/gazconsumer/runtime/membertest"
	"github.com/gazconsumer/gazconsumer/runtime/partition"
	"github.com/gazconsumer/gazconsumer/runtime/query"
	"github.com/gazconsumer/gazconsumer/runtime/query/internal/testpb"
	"go.gazette.dev/core/auth"
	pb "go.gazette.dev/core/broker/protocol"
	pc "go.gazette.dev/core/consumer/protocol"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"
)

// A query during a fail-over is answered by the primary, old or new, or
// fails clearly (Unavailable, naming the shard: recovering, unassigned, or
// its primary unreachable); it is never answered with state older than an
// answer before it: the answers of sequential queries,
// while deposits flow, only grow. The primary of the account's shard is
// killed mid-way; its standby on the other member takes over, and answers.
func TestQueryDuringFailover(t *testing.T) {
	t.Run("killed", func(t *testing.T) {
		testQueryDuringFailover(t, func(_ *fixture, victim *membertest.Member) error { return victim.Kill() })
	})
	// Stopped: its shards handed off to their standbys, which take over at
	// once, while the member stopping may still be serving. A third member
	// takes the standbys' place (the allocator keeps a shard's replication).
	t.Run("stopped", func(t *testing.T) {
		testQueryDuringFailover(t, func(f *fixture, victim *membertest.Member) error {
			var m, err = f.c.Start("member-c")
			if err != nil {
				return err
			}
			t.Cleanup(func() { _ = m.Kill() })
			return victim.Stop()
		})
	})
}

func testQueryDuringFailover(t *testing.T, depose func(*fixture, *membertest.Member) error) {
	var ctx, cancel = context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var f = newFixture(t, ctx, 2, nil)
	f.deposit("ann", 1, false)
	f.caughtUp()
	var victim = f.primaryOf("ann")
	var survivor = otherThan(f.members, victim)

	var routed = f.routedByEtcd()
	var clients = map[string]*query.Client{"routed": routed, "through the survivor": f.through(survivor)}

	// Deposits flow into ann's account.
	var published atomic.Int64
	published.Store(1)
	var stopFlow = make(chan struct{})
	var flowing sync.WaitGroup
	flowing.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stopFlow:
				return
			default:
			}
			var aa, err = f.pub.PublishCommitted(f.mapping, &testpb.Deposit{Account: "ann", Entry: fmt.Sprintf("flow-%05d", i), Cents: 1})
			if err == nil {
				err = aa.Err()
			}
			if err != nil {
				t.Errorf("publishing: %v", err)
				return
			}
			published.Add(1)
			time.Sleep(2 * time.Millisecond)
		}
	})

	type answer struct {
		deposits int64
		err      error
		at       time.Time
	}
	var answers = map[string][]answer{}
	var ask = func(name string) answer {
		var qctx, cancel = context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		var got, err = getTotal(qctx, clients[name], "ann")
		var a = answer{deposits: got.GetDeposits(), err: err, at: time.Now()}
		answers[name] = append(answers[name], a)
		return a
	}
	var run = func(until func() bool) {
		for !until() {
			for name := range clients {
				ask(name)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	var start = time.Now()
	run(func() bool { return time.Since(start) > 300*time.Millisecond })
	var killedAt = time.Now()
	if err := depose(f, victim); err != nil {
		t.Fatal(err)
	}
	var lastBefore int64
	for _, as := range answers {
		for _, a := range as {
			if a.err == nil {
				lastBefore = max(lastBefore, a.deposits)
			}
		}
	}
	// Until both clients are answered, past what was answered before.
	run(func() bool {
		if ctx.Err() != nil {
			return true
		}
		for name := range clients {
			var as = answers[name]
			if a := as[len(as)-1]; a.err != nil || a.deposits <= lastBefore || !a.at.After(killedAt) {
				return false
			}
		}
		return true
	})
	if ctx.Err() != nil {
		t.Fatalf("the new primary never answered: %v", ctx.Err())
	}
	close(stopFlow)
	flowing.Wait()

	for name, as := range answers {
		var last int64
		var failed int
		var why = map[string]int{} // Distinct failures, but for their member's name.
		for i, a := range as {
			if a.err != nil {
				failed++
				why[status.Convert(a.err).Message()]++
				if c := status.Code(a.err); c != codes.Unavailable && c != codes.DeadlineExceeded {
					t.Errorf("%s: answer %d: %v, want Unavailable", name, i, a.err)
				} else if c == codes.Unavailable && !strings.Contains(a.err.Error(), "shard q-0") {
					t.Errorf("%s: answer %d: %v does not name the shard", name, i, a.err)
				}
				continue
			}
			if a.deposits < last {
				t.Errorf("%s: answer %d is of %d deposits, after an answer of %d: a stale answer", name, i, a.deposits, last)
			}
			last = a.deposits
		}
		t.Logf("%s: %d answers, %d failed, last of %d deposits (%d published, %d before the kill); failures: %v",
			name, len(as), failed, last, published.Load(), lastBefore, why)
	}
	// Every deposit is there, as the new primary answers.
	f.caughtUp()
	if got, err := getTotal(ctx, routed, "ann"); err != nil || got.Deposits != published.Load() {
		t.Fatalf("after the fail-over: %v, %v; want %d deposits", got, err, published.Load())
	}
}

// With the members' authorization keys, a call needs a token of capability
// READ covering the shards answering it: none is Unauthenticated, one of
// another shard PermissionDenied; the member proxying a call signs its own.
func TestAuthorization(t *testing.T) {
	var ctx, cancel = context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var keys, err = auth.NewKeyedAuth("c2VjcmV0LWtleS1vZi10aGUtdGVzdA==")
	if err != nil {
		t.Fatal(err)
	}
	var f = newFixture(t, ctx, 2, func(c *membertest.Cluster) { c.Verifier, c.Authorizer = keys, keys })
	var accounts = []string{"a", "b", "c", "d", "e", "f"}
	for _, a := range accounts {
		f.deposit(a, 5, false)
	}
	f.caughtUp()

	var conn, cerr = grpc.NewClient(f.members[0].Svc.Endpoint().GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if cerr != nil {
		t.Fatal(cerr)
	}
	defer conn.Close()
	if _, err = getTotal(ctx, query.NewClient(conn, nil), "a"); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("without a token: %v", err)
	}
	var c = query.NewClient(conn, keys)
	for _, a := range accounts { // Some proxied to member-b.
		if got, err := getTotal(ctx, c, a); err != nil || got.Cents != 5 {
			t.Fatalf("GetTotal(%s): %v, %v", a, got, err)
		}
	}
	if totals, _, err := listTotals(ctx, c, 2); err != nil || len(totals) != len(accounts) {
		t.Fatalf("ListTotals: %v, %v", totals, err)
	}
	// A token of shard q-00 reads q-00 only.
	var only, aerr = keys.Authorize(ctx, pb.Claims{Capability: pb.Capability_READ,
		Selector: pb.LabelSelector{Include: pb.MustLabelSet("id", "q-00")}}, time.Minute)
	if aerr != nil {
		t.Fatal(aerr)
	}
	var denied, allowed int
	for _, a := range accounts {
		var err = conn.Invoke(only, testQueries.FullMethod("GetTotal"), &testpb.GetTotalRequest{Account: a}, new(testpb.Total))
		switch {
		case err == nil:
			allowed++
		case status.Code(err) == codes.PermissionDenied && strings.Contains(err.Error(), "shard q-01"):
			denied++
		default:
			t.Fatalf("GetTotal(%s) with a token of q-00: %v", a, err)
		}
	}
	if denied == 0 || allowed == 0 {
		t.Fatalf("with a token of q-00: %d allowed, %d denied", allowed, denied)
	}
	// Without capability READ: Gazette's verifier says Unauthenticated.
	var listOnly, _ = keys.Authorize(ctx, pb.Claims{Capability: pb.Capability_LIST}, time.Minute)
	if err = conn.Invoke(listOnly, testQueries.FullMethod("GetTotal"), &testpb.GetTotalRequest{Account: "a"}, new(testpb.Total)); status.Code(err) != codes.Unauthenticated ||
		!strings.Contains(err.Error(), "missing required READ capability") {
		t.Fatalf("with capability LIST: %v", err)
	}
}

// A member serves gRPC server reflection, listing the queries services and
// serving their files, from which a client knowing nothing else (as
// grpcurl) calls them.
func TestReflectionListsQueries(t *testing.T) {
	var ctx, cancel = context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var f = newFixture(t, ctx, 1, nil)
	var conn, err = grpc.NewClient(f.members[1].Svc.Endpoint().GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	stream, err := reflectionpb.NewServerReflectionClient(conn).ServerReflectionInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err = stream.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}}); err != nil {
		t.Fatal(err)
	}
	resp, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range resp.GetListServicesResponse().GetService() {
		names = append(names, s.Name)
	}
	if !slices.Contains(names, testQueries.Name) || !slices.Contains(names, "consumer.Shard") {
		t.Fatalf("reflection lists %v", names)
	}
	if err = stream.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_FileContainingSymbol{
		FileContainingSymbol: testQueries.Name}}); err != nil {
		t.Fatal(err)
	}
	if resp, err = stream.Recv(); err != nil || len(resp.GetFileDescriptorResponse().GetFileDescriptorProto()) == 0 {
		t.Fatalf("the file of %s: %v, %v", testQueries.Name, resp, err)
	}
	_ = stream.CloseSend()

	// Call it as grpcurl does: of the descriptors reflection served alone,
	// with a request of JSON.
	var fds descriptorpb.FileDescriptorSet
	for _, b := range resp.GetFileDescriptorResponse().GetFileDescriptorProto() {
		var fd = new(descriptorpb.FileDescriptorProto)
		if err = proto.Unmarshal(b, fd); err != nil {
			t.Fatal(err)
		}
		fds.File = append(fds.File, fd)
	}
	files, err := protodesc.NewFiles(&fds)
	if err != nil {
		t.Fatal(err)
	}
	d, err := files.FindDescriptorByName(protoreflect.FullName(testQueries.Name))
	if err != nil {
		t.Fatal(err)
	}
	var method = d.(protoreflect.ServiceDescriptor).Methods().ByName("GetTotal")
	var req, res = dynamicpb.NewMessage(method.Input()), dynamicpb.NewMessage(method.Output())
	if err = protojson.Unmarshal([]byte(`{"account": "ann"}`), req); err != nil {
		t.Fatal(err)
	}
	f.deposit("ann", 42, false)
	f.caughtUp()
	if err = conn.Invoke(ctx, testQueries.FullMethod("GetTotal"), req, res); err != nil {
		t.Fatal(err)
	}
	if got, _ := protojson.Marshal(res); !strings.Contains(string(got), `"cents":"42"`) {
		t.Fatalf("GetTotal of a dynamic request: %s", got)
	}
}

// A shard that failed answers FailedPrecondition, naming it and its
// error; the other shard goes on answering.
func TestFailedShard(t *testing.T) {
	var ctx, cancel = context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var f = newFixture(t, ctx, 2, nil)
	var accounts = []string{"a", "b", "c", "d", "e", "f"}
	for _, a := range accounts {
		f.deposit(a, 3, false)
	}
	f.caughtUp()
	var victim = f.primaryOf("a")
	var aa, err = f.pub.PublishCommitted(f.mapping, &testpb.Deposit{Account: "a", Entry: poisonEntry, Cents: 1})
	if err == nil {
		err = aa.Err()
	}
	if err != nil {
		t.Fatal(err)
	}
	journal, _, _ := f.mapping(&testpb.Deposit{Account: "a"})
	var failed pc.ShardID
	for i := range f.shards {
		if strings.HasSuffix(journal.String(), fmt.Sprintf("part-%02d", i)) {
			failed = shardID(i)
		}
	}
	if _, err = f.c.WaitStatus(ctx, failed, victim.ID(), pc.ReplicaStatus_FAILED); err != nil {
		t.Fatal(err)
	}
	var c = f.through(otherThan(f.members, victim))
	var answered, refused int
	for _, a := range accounts {
		var got, err = getTotal(ctx, c, a)
		switch {
		case err == nil && got.Cents == 3:
			answered++
		case status.Code(err) == codes.FailedPrecondition && strings.Contains(err.Error(), "shard "+failed.String()+" failed") &&
			strings.Contains(err.Error(), "poisoned"):
			refused++
		default:
			t.Fatalf("GetTotal(%s) with shard %s failed: %v, %v", a, failed, got, err)
		}
	}
	if answered == 0 || refused == 0 {
		t.Fatalf("%d answered, %d refused", answered, refused)
	}
	// A scan of every shard fails clearly too.
	if _, _, err = listTotals(ctx, c, 10); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("ListTotals with shard %s failed: %v", failed, err)
	}
}

// A client routing by a KeySpace loaded after writes elsewhere in etcd
// (whose revision the members' watches of their own prefix do not report)
// is answered at once: a route carries the revision of the keys it was
// resolved from, which the members have observed.
func TestRoutedAfterWritesElsewhere(t *testing.T) {
	var ctx, cancel = context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var f = newFixture(t, ctx, 2, nil)
	f.deposit("ann", 5, false)
	f.caughtUp()
	for i := range 20 {
		if _, err := f.stack.Etcd().Put(ctx, fmt.Sprintf("/elsewhere/%d", i), "x"); err != nil {
			t.Fatal(err)
		}
	}
	var watchCtx, stopWatch = context.WithCancel(ctx)
	defer stopWatch()
	var ks, err = groupkeys.Watch(watchCtx, f.stack.Etcd(), f.c.Prefix)
	if err != nil {
		t.Fatal(err)
	}
	// The scenario: the client's KeySpace is at a revision past every
	// member's.
	ks.Mu.RLock()
	var clientRev = ks.Header.Revision
	ks.Mu.RUnlock()
	for _, m := range f.members {
		var mks = m.Svc.KeySpace()
		mks.Mu.RLock()
		var rev = mks.Header.Revision
		mks.Mu.RUnlock()
		if rev >= clientRev {
			t.Fatalf("member %s's KeySpace is at revision %d, the client's at %d", m.ID().Suffix, rev, clientRev)
		}
	}
	var routed = query.NewRoutedClient(query.NewRouter(ks, partition.NewWatched(watchCtx, f.stack.Journals())), query.Dialer(nil), nil)
	defer routed.Close()
	var qctx, stop = context.WithTimeout(ctx, 5*time.Second)
	defer stop()
	if got, err := getTotal(qctx, routed, "ann"); err != nil || got.Cents != 5 {
		t.Fatalf("routed GetTotal: %v, %v", got, err)
	}
	if totals, _, err := listTotals(qctx, routed, 10); err != nil || len(totals) != 1 {
		t.Fatalf("routed ListTotals: %v, %v", totals, err)
	}
}
