package query_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gazconsumer/gazconsumer/runtime"
	"github.com/gazconsumer/gazconsumer/runtime/membertest"
	"github.com/gazconsumer/gazconsumer/runtime/query"
	"github.com/gazconsumer/gazconsumer/runtime/query/internal/testpb"
	"github.com/gazconsumer/gazconsumer/store/rocks"
	"go.gazette.dev/core/auth"
	pb "go.gazette.dev/core/broker/protocol"
	pc "go.gazette.dev/core/consumer/protocol"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

// Queries and Stats issued the moment the shards are applied, before any
// has a primary, let alone a recovered one, are answered once the shards
// serve, within their deadlines: a call finding its shard unassigned is
// tried again by the client, and one reaching a primary still recovering
// waits for it, as Gazette's resolver waits. No call fails Unavailable.
func TestQueriesRightAfterApply(t *testing.T) {
	var ctx, cancel = context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var f = startFixture(t, ctx, 4, nil, rocks.Opener{})
	var accounts = []string{"a", "b", "c", "d", "e", "f", "g", "h"}
	for _, a := range accounts {
		f.deposit(a, 7, false)
	}
	var heads = pb.Offsets{}
	for i := range f.shards {
		var journal = pb.Journal(fmt.Sprintf("%s/deposits/part-%02d", f.prefix, i))
		var head, err = membertest.WriteHead(ctx, f.stack.Journals(), journal)
		if err != nil {
			t.Fatal(err)
		}
		heads[journal] = head
	}
	var routed = f.routedByEtcd()
	var clients = map[string]*query.Client{"routed": routed, "through a": f.through(f.members[0]), "through b": f.through(f.members[1])}

	if err := f.c.Apply(ctx, f.members[0], shardSpecs(f.prefix, f.shards)...); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var failures []string
	var fail = func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		failures = append(failures, fmt.Sprintf(format, args...))
	}
	var wg sync.WaitGroup
	for name, c := range clients {
		for _, a := range accounts {
			wg.Go(func() {
				var qctx, cancel = context.WithTimeout(ctx, 30*time.Second)
				defer cancel()
				// Answered from a serving primary: its committed state, which
				// may not yet hold the deposit (NotFound), or holds all of it.
				var got, err = getTotal(qctx, c, a)
				if status.Code(err) == codes.NotFound && strings.Contains(err.Error(), "shard q-0") {
					return
				} else if err != nil || got.Cents != 7 {
					fail("%s: GetTotal(%s) right after the apply: %v, %v", name, a, got, err)
				}
			})
		}
	}
	for _, m := range f.members {
		var sc, err = f.c.ShardClient(m.Svc.Endpoint())
		if err != nil {
			t.Fatal(err)
		}
		for i := range f.shards {
			wg.Go(func() {
				var sctx, cancel = context.WithTimeout(ctx, 30*time.Second)
				defer cancel()
				var resp, err = sc.Stat(sctx, &pc.StatRequest{Shard: shardID(i), ReadThrough: heads})
				// Right after the apply, a shard may not be assigned yet:
				// Gazette's Stat answers NO_SHARD_PRIMARY, and its caller
				// asks again; once assigned, a Stat waits for the primary.
				// A member whose watch has not yet seen the apply answers
				// SHARD_NOT_FOUND, as Gazette's does.
				for err == nil && (resp.Status == pc.Status_NO_SHARD_PRIMARY || resp.Status == pc.Status_SHARD_NOT_FOUND) && sctx.Err() == nil {
					time.Sleep(10 * time.Millisecond)
					resp, err = sc.Stat(sctx, &pc.StatRequest{Shard: shardID(i), ReadThrough: heads})
				}
				if err != nil || resp.Status != pc.Status_OK {
					fail("Stat of %s through %s right after the apply: %v, %v", shardID(i), m.ID().Suffix, resp, err)
				} else if j := pb.Journal(fmt.Sprintf("%s/deposits/part-%02d", f.prefix, i)); resp.ReadThrough[j] < heads[j] {
					fail("Stat of %s through %s: read through %d of %s, want at least %d", shardID(i), m.ID().Suffix, resp.ReadThrough[j], j, heads[j])
				}
			})
		}
	}
	wg.Wait()
	for _, msg := range failures {
		t.Error(msg)
	}
	// Having read through the heads (the Stats above), every shard
	// answers every deposit.
	for name, c := range clients {
		for _, a := range accounts {
			if got, err := getTotal(ctx, c, a); err != nil || got.Cents != 7 {
				t.Errorf("%s: GetTotal(%s) once read through: %v, %v", name, a, got, err)
			}
		}
	}
}

// Stat checks the caller's claims against the shard's labels, as Gazette's
// does: a shard the token does not cover is not found; Stat called on a
// member that is not the shard's primary is proxied to the primary, with
// the caller's claims.
func TestStatAuthorizedAndProxied(t *testing.T) {
	var ctx, cancel = context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var keys, err = auth.NewKeyedAuth("c2VjcmV0LWtleS1vZi10aGUtdGVzdA==")
	if err != nil {
		t.Fatal(err)
	}
	var f = newFixture(t, ctx, 2, func(c *membertest.Cluster) { c.Verifier, c.Authorizer = keys, keys })
	f.deposit("a", 1, false)
	for i := range f.shards {
		var id = shardID(i)
		var primary, err = f.c.PrimaryOf(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range f.members {
			var sc, err = f.c.ShardClient(m.Svc.Endpoint())
			if err != nil {
				t.Fatal(err)
			}
			// The token of the shard itself: answered, by the primary.
			resp, err := sc.Stat(ctx, &pc.StatRequest{Shard: id})
			if err != nil || resp.Status != pc.Status_OK {
				t.Fatalf("Stat of %s through %s: %v, %v", id, m.ID().Suffix, resp, err)
			} else if resp.Header.ProcessId != primary.ID() {
				t.Errorf("Stat of %s through %s was answered by %s, want its primary %s", id, m.ID().Suffix, resp.Header.ProcessId.Suffix, primary.ID().Suffix)
			}
			// A token of the other shard: as if it did not exist.
			var other, aerr = keys.Authorize(ctx, pb.Claims{Capability: pb.Capability_READ,
				Selector: pb.LabelSelector{Include: pb.MustLabelSet("id", shardID(1-i).String())}}, time.Minute)
			if aerr != nil {
				t.Fatal(aerr)
			}
			resp, err = pc.NewShardClient(connOf(t, m)).Stat(other, &pc.StatRequest{Shard: id})
			if err != nil || resp.Status != pc.Status_SHARD_NOT_FOUND {
				t.Errorf("Stat of %s through %s with a token of %s: %v, %v; want SHARD_NOT_FOUND", id, m.ID().Suffix, shardID(1-i), resp, err)
			}
		}
	}
}

// connOf returns a connection to member m, closed when the test ends.
func connOf(t *testing.T, m *membertest.Member) *grpc.ClientConn {
	t.Helper()
	var conn, err = grpc.NewClient(m.Svc.Endpoint().GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// A query reaching the primary of its shard while the primary is still
// opening its store (recovering it, or starting) waits until the primary
// serves, within the call's deadline, and is answered then: it neither
// fails Unavailable nor answers before. The call is made without the
// query client's retries, as a plain gRPC call.
func TestQueryWaitsForRecoveringPrimary(t *testing.T) {
	var ctx, cancel = context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var gate = make(chan struct{})
	var gated = runtime.StoreOpenerFunc(func(s runtime.Shard, r runtime.Recorder) (runtime.Store, error) {
		select {
		case <-gate:
		case <-s.Context().Done():
			return nil, s.Context().Err()
		}
		return rocks.Opener{}.OpenStore(s, r)
	})
	var f = startFixture(t, ctx, 1, nil, gated)
	f.deposit("a", 7, false)
	if err := f.c.Apply(ctx, f.members[0], shardSpecs(f.prefix, 1)...); err != nil {
		t.Fatal(err)
	}
	// Once the shard is assigned, ask each member, neither serving it.
	for assigned := false; !assigned; time.Sleep(membertest.PollInterval) {
		var shards, err = f.c.List(ctx, f.members[0])
		if err != nil {
			t.Fatal(err)
		}
		assigned = len(shards) == 1 && shards[0].Route.Primary != -1
	}
	// Each member routes by its own view of etcd: both must hold the
	// assignment, or one answers that no shard reads the key's partition.
	if err := f.c.WaitSeen(ctx); err != nil {
		t.Fatal(err)
	}
	type answer struct {
		total *testpb.Total
		err   error
		at    time.Time
	}
	var answers = make(chan answer, len(f.members))
	for _, m := range f.members {
		go func() {
			var qctx, cancel = context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			var total = new(testpb.Total)
			var err = connOf(t, m).Invoke(qctx, testQueries.FullMethod("GetTotal"), &testpb.GetTotalRequest{Account: "a"}, total)
			answers <- answer{total, err, time.Now()}
		}()
	}
	time.Sleep(500 * time.Millisecond)
	select {
	case a := <-answers:
		t.Fatalf("answered while the primary was still opening its store: %v, %v", a.total, a.err)
	default:
	}
	var opened = time.Now()
	close(gate)
	for range f.members {
		var a = <-answers
		if a.at.Before(opened) {
			t.Errorf("answered before the store opened: %v, %v", a.total, a.err)
		}
		// Answered by the serving primary: from its committed state, which
		// may not yet hold the deposit.
		if status.Code(a.err) != codes.NotFound && (a.err != nil || a.total.Cents != 7) {
			t.Errorf("GetTotal while the primary opened its store: %v, %v", a.total, a.err)
		}
	}
}
