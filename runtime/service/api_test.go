package service_test

import (
	"context"
	"testing"
	"time"

	pc "go.gazette.dev/core/consumer/protocol"
)

// Shard specs applied through the Shard API without transaction durations
// take the application's defaults; those with them keep theirs.
func TestApplyCompletesSpecsWithDefaults(t *testing.T) {
	var ctx, cancel = context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var c = newCluster(t, 2)
	var m = start(t, c, "member-a")
	var sc = shardClient(t, c, m)

	var bare, set = c.ShardSpec(0), c.ShardSpec(1)
	bare.MinTxnDuration, bare.MaxTxnDuration, bare.HotStandbys = 0, 0, 0
	set.HotStandbys = 0
	var resp, err = sc.Apply(ctx, &pc.ApplyRequest{Changes: []pc.ApplyRequest_Change{{Upsert: bare}, {Upsert: set}}})
	if err != nil || resp.Status != pc.Status_OK {
		t.Fatalf("Apply: %v %v", resp, err)
	}
	list, err := sc.List(ctx, &pc.ListRequest{})
	must(t, err)
	var got = make(map[pc.ShardID]pc.ShardSpec)
	for _, s := range list.Shards {
		got[s.Spec.Id] = s.Spec
	}
	for id, want := range map[pc.ShardID][2]time.Duration{
		bare.Id: {2 * time.Millisecond, 50 * time.Millisecond},
		set.Id:  {c.ShardSpec(1).MinTxnDuration, c.ShardSpec(1).MaxTxnDuration},
	} {
		if s := got[id]; s.MinTxnDuration != want[0] || s.MaxTxnDuration != want[1] {
			t.Errorf("shard %s: min/max transaction durations %s/%s, want %s/%s", id, s.MinTxnDuration, s.MaxTxnDuration, want[0], want[1])
		}
	}
}
