package query_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gazconsumer/gazconsumer/runtime"
	"github.com/gazconsumer/gazconsumer/runtime/query/internal/testpb"
	"github.com/gazconsumer/gazconsumer/specs"
	pc "go.gazette.dev/core/consumer/protocol"
	"go.gazette.dev/core/labels"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Growing a family the way Gazette lets one grow, a journal more with
// gazctl journals apply, makes the shards of a consumer with tables built
// under the former partitions fail at their next transaction, naming the
// shard, the family and both counts: they commit nothing under the new
// partitioning, and queries say why they are refused.
func TestGrowingAFamilyFailsItsShards(t *testing.T) {
	var ctx, cancel = context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var f = newFixture(t, ctx, 2, nil)
	var accounts = []string{"a", "b", "c", "d", "e", "f"}
	for _, a := range accounts {
		f.deposit(a, 3, false)
	}
	f.caughtUp()
	var primaries = map[int]string{}
	for i := range f.shards {
		var m, err = f.c.PrimaryOf(ctx, shardID(i))
		if err != nil {
			t.Fatal(err)
		}
		primaries[i] = m.ID().Suffix
	}

	// The family grows from 2 partitions to 3, and the load goes on under 3.
	if _, err := specs.ApplyJournals(ctx, f.stack.Journals(), "grown journals", []byte(partitionYAML(f.prefix, 2))); err != nil {
		t.Fatal(err)
	}
	// The load goes on, routed under 3 partitions once publishers see them.
	var loadCtx, stopLoad = context.WithCancel(ctx)
	defer stopLoad()
	go func() {
		for i := 0; loadCtx.Err() == nil; i++ {
			var aa, err = f.pub.PublishCommitted(f.mapping, &testpb.Deposit{Account: accounts[i%len(accounts)], Entry: fmt.Sprintf("late-%05d", i), Cents: 1})
			if err == nil {
				err = aa.Err()
			}
			if err != nil && loadCtx.Err() == nil {
				t.Errorf("publishing: %v", err)
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	for i := range f.shards {
		for _, m := range f.members {
			if m.ID().Suffix != primaries[i] {
				continue
			}
			var st, err = f.c.WaitStatus(ctx, shardID(i), m.ID(), pc.ReplicaStatus_FAILED)
			if err != nil {
				t.Fatal(err)
			}
			var msg = strings.Join(st.Errors, "; ")
			for _, want := range []string{"shard " + shardID(i).String(), runtime.ErrRepartitioned.Error(),
				"message-type=" + depositType, "now has 3 partitions", "built under 2"} {
				if !strings.Contains(msg, want) {
					t.Errorf("shard %s failed with %q, which does not say %q", shardID(i), msg, want)
				}
			}
		}
	}
	stopLoad()
	// Queries are refused, saying why.
	// (A key of the new partition, which no shard reads, is retried until
	// the call's deadline: Unavailable.)
	var c = f.through(f.members[0])
	var refused int
	for _, a := range accounts {
		var qctx, cancel = context.WithTimeout(ctx, 3*time.Second)
		var _, err = getTotal(qctx, c, a)
		cancel()
		switch {
		case status.Code(err) == codes.FailedPrecondition && strings.Contains(err.Error(), "now has 3 partitions"):
			refused++
		case status.Code(err) == codes.Unavailable && strings.Contains(err.Error(), "no shard of") && strings.Contains(err.Error(), "part-02"):
		default:
			t.Errorf("GetTotal(%s) of a repartitioned consumer: %v", a, err)
		}
	}
	if refused == 0 {
		t.Error("no query was refused naming the repartition")
	}
}

// partitionYAML is the spec of partition i of the test consumer's deposits,
// to apply beside those journalsYAML applied.
func partitionYAML(prefix string, i int) string {
	return fmt.Sprintf(`name: %s/deposits/
replication: 1
fragment:
  length: 1048576
  stores: [file:///]
  refresh_interval: 1s
  compression_codec: NONE
labels:
  - name: %s
    value: %s
  - name: content-type
    value: %s
children:
  - name: %s/deposits/part-%02d
`, prefix, labels.MessageType, depositType, labels.ContentType_ProtoFixed, prefix, i)
}
