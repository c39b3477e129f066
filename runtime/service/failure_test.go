package service_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/gazconsumer/gazconsumer/runtime/service/internal/sums"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.gazette.dev/core/allocator"
	"go.gazette.dev/core/broker/client"
	pb "go.gazette.dev/core/broker/protocol"
	pc "go.gazette.dev/core/consumer/protocol"
)

// A message that fails to decode fails the shard, and its status names the
// journal and the offset.
func TestUndecodableMessageFailsTheShard(t *testing.T) {
	var ctx, cancel = context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var c = newCluster(t, 1)
	var stack = c.Stack
	var err error

	var m = start(t, c, "member-a")
	var spec = sums.ShardSpec(0)
	spec.HotStandbys = 0
	var sc = shardClient(t, c, m)
	if resp, err := sc.Apply(ctx, &pc.ApplyRequest{Changes: []pc.ApplyRequest_Change{{Upsert: spec}}}); err != nil || resp.Status != pc.Status_OK {
		t.Fatalf("Apply: %v %v", resp, err)
	}
	if _, err = client.Append(ctx, stack.Journals(), pb.AppendRequest{Journal: "sums/input/part-0"},
		strings.NewReader("{\"Key\": \"fine\", \"Value\": 1}\n{this is not json}\n")); err != nil {
		t.Fatal(err)
	}

	var prefix = allocator.ItemAssignmentsPrefix(m.Svc.KeySpace(), spec.Id.String())
	for {
		var resp, err = stack.Etcd().Get(ctx, prefix, clientv3.WithPrefix())
		if err != nil {
			t.Fatal(err)
		}
		for _, kv := range resp.Kvs {
			var st pc.ReplicaStatus
			if st.Unmarshal(kv.Value) == nil && st.Code == pc.ReplicaStatus_FAILED {
				if len(st.Errors) != 1 || !strings.Contains(st.Errors[0], "sums/input/part-0") || !strings.Contains(st.Errors[0], "offset") {
					t.Fatalf("failed status %v does not name the journal and offset", st.Errors)
				}
				return
			}
		}
		select {
		case <-ctx.Done():
			t.Fatal("the shard did not fail")
		case <-time.After(20 * time.Millisecond):
		}
	}
}
