package service_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gazconsumer/gazconsumer/runtime/membertest"
	"github.com/gazconsumer/gazconsumer/runtime/membertest/sums"
	"github.com/gazconsumer/gazconsumer/runtime/source"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.gazette.dev/core/allocator"
	"go.gazette.dev/core/broker/client"
	pb "go.gazette.dev/core/broker/protocol"
	pc "go.gazette.dev/core/consumer/protocol"
	"go.gazette.dev/core/labels"
	"go.gazette.dev/core/message"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Changes of a shard's spec reach its running primary: a decode policy
// added to its labels applies to the next undecodable message, without a
// restart; new sources restart the replica, which then reads them.
func TestSpecChangesReachRunningShards(t *testing.T) {
	var ctx, cancel = context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var c = newCluster(t, 2)
	var a = start(t, c, "member-a")
	var spec = c.ShardSpec(0)
	spec.HotStandbys = 0
	var apply = func() {
		t.Helper()
		var resp, err = shardClient(t, c, a).Apply(ctx, &pc.ApplyRequest{Changes: []pc.ApplyRequest_Change{{Upsert: spec, ExpectModRevision: -1}}})
		if err != nil || resp.Status != pc.Status_OK {
			t.Fatalf("Apply: %v %v", resp, err)
		}
	}
	apply()
	var feed = c.NewFeed(ctx)
	must(t, feed.Publish(10))
	var head, err = membertest.WriteHead(ctx, c.Stack.Journals(), c.Input(0))
	must(t, err)
	must(t, c.WaitReadThrough(ctx, sums.ShardID(0), pb.Offsets{c.Input(0): head}))

	// Skip from now on: the running primary skips the next bad message.
	spec.LabelSet = pb.MustLabelSet(source.LabelOnDecodeError, "skip", source.LabelDeadLetterJournal, c.DeadLetters().String())
	apply()
	resp, err := client.Append(ctx, c.Stack.Journals(), pb.AppendRequest{Journal: c.Input(0)}, strings.NewReader("{not json}\n"))
	must(t, err)
	var badAt = resp.Commit.Begin
	must(t, feed.Publish(10))
	head, err = membertest.WriteHead(ctx, c.Stack.Journals(), c.Input(0))
	must(t, err)
	must(t, c.WaitReadThrough(ctx, sums.ShardID(0), pb.Offsets{c.Input(0): head}))
	skipped, err := source.ListSkipped(ctx, c.Stack.Journals(), c.DeadLetters())
	must(t, err)
	if len(skipped) != 1 || skipped[0].Begin != badAt {
		t.Fatalf("skipped %+v, want the message at %d", skipped, badAt)
	}

	// A second source: the replica restarts, and reads it too.
	spec.Sources = append(spec.Sources, pc.ShardSpec_Source{Journal: c.Input(1)})
	apply()
	_, err = client.Append(ctx, c.Stack.Journals(), pb.AppendRequest{Journal: c.Input(1)},
		strings.NewReader(fmt.Sprintf("{\"uuid\": %q, \"Key\": \"k\", \"Value\": 1}\n", message.BuildUUID(message.NewProducerID(), 1, message.Flag_OUTSIDE_TXN).String())))
	must(t, err)
	head1, err := membertest.WriteHead(ctx, c.Stack.Journals(), c.Input(1))
	must(t, err)
	var statCtx, cancelStat = context.WithTimeout(ctx, 30*time.Second)
	defer cancelStat()
	for {
		var m, err = c.PrimaryOf(statCtx, sums.ShardID(0))
		must(t, err)
		st, err := shardClient(t, c, m).Stat(statCtx, &pc.StatRequest{Shard: sums.ShardID(0), ReadThrough: pb.Offsets{c.Input(1): head1}})
		if err == nil && st.Status == pc.Status_OK {
			break
		} else if statCtx.Err() != nil {
			t.Fatalf("the shard did not read its new source %s through %d: %v %v", c.Input(1), head1, st, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Unassign removes a shard's primary assignment, not its hot standby,
// which takes over, as with Gazette's consumers.
func TestUnassignKeepsHotStandbys(t *testing.T) {
	var ctx, cancel = context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var c = newCluster(t, 1)
	var a, b = start(t, c, "member-a"), start(t, c, "member-b")
	must(t, c.ApplyShards(ctx, a, nil)) // One hot standby.
	var feed = c.NewFeed(ctx)
	must(t, feed.Publish(20))
	must(t, c.WaitCaughtUp(ctx))

	var primary, err = c.PrimaryOf(ctx, sums.ShardID(0))
	must(t, err)
	var standby = a
	if primary == a {
		standby = b
	}
	// Wait for the standby to tail the recovery log.
	for {
		var shards, err = c.List(ctx, a)
		must(t, err)
		var ready bool
		for _, sh := range shards {
			for i, m := range sh.Route.Members {
				ready = ready || (m == standby.ID() && sh.Status[i].Code == pc.ReplicaStatus_STANDBY)
			}
		}
		if ready {
			break
		} else if ctx.Err() != nil {
			t.Fatal("no standby")
		}
		time.Sleep(20 * time.Millisecond)
	}

	// Watch the shard's assignments from now on: Unassign deletes in one
	// etcd transaction, whose events come first.
	var prefix = allocator.ItemAssignmentsPrefix(a.Svc.KeySpace(), sums.ShardID(0).String())
	var now, err2 = c.Stack.Etcd().Get(ctx, prefix, clientv3.WithPrefix())
	must(t, err2)
	var watch = c.Stack.Etcd().Watch(ctx, prefix, clientv3.WithPrefix(), clientv3.WithRev(now.Header.Revision+1))

	resp, err := shardClient(t, c, a).Unassign(ctx, &pc.UnassignRequest{Shards: []pc.ShardID{sums.ShardID(0)}})
	if err != nil || resp.Status != pc.Status_OK || len(resp.Shards) != 1 {
		t.Fatalf("Unassign: %v %v", resp, err)
	}
	var first = <-watch
	var deleted []string
	for _, ev := range first.Events {
		if ev.Type == clientv3.EventTypeDelete && ev.Kv.ModRevision == first.Events[0].Kv.ModRevision {
			deleted = append(deleted, string(ev.Kv.Key))
		}
	}
	if len(deleted) != 1 || !strings.Contains(deleted[0], primary.ID().Suffix) {
		t.Fatalf("Unassign deleted assignments %v, want only the primary's (%s)", deleted, primary.ID().Suffix)
	}
	// The former primary's assignment is gone: wait for another primary.
	var deadline = time.Now().Add(30 * time.Second)
	for {
		var next, err = c.PrimaryOf(ctx, sums.ShardID(0))
		must(t, err)
		if next == standby {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("after Unassign, the primary is %s, want the standby %s", next.ID().Suffix, standby.ID().Suffix)
		}
		time.Sleep(20 * time.Millisecond)
	}
	must(t, feed.Publish(5))
	must(t, c.WaitCaughtUp(ctx))
}

// typedApp is the sums application, reading only journals of its content type.
type typedApp struct{ sums.App }

func (a typedApp) NewMessage(spec *pb.JournalSpec) (message.Message, error) {
	if ct := spec.LabelSet.ValueOf(labels.ContentType); ct != sums.ContentType {
		return nil, fmt.Errorf("journal %s: content-type %q is not %q", spec.Name, ct, sums.ContentType)
	}
	return a.App.NewMessage(spec)
}

// Apply refuses a shard whose source holds messages the consumer does not
// read, naming the journal, rather than a shard that would fail at run time.
func TestApplyChecksSourceMessageTypes(t *testing.T) {
	var ctx, cancel = context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var c = newCluster(t, 2)
	c.App = typedApp{sums.App{Output: c.Output()}}
	var a = start(t, c, "member-a")
	var spec = c.ShardSpec(0)
	spec.Sources = []pc.ShardSpec_Source{{Journal: c.ShardSpec(1).RecoveryLog()}}
	var _, err = shardClient(t, c, a).Apply(ctx, &pc.ApplyRequest{Changes: []pc.ApplyRequest_Change{{Upsert: spec}}})
	var want = fmt.Sprintf("shard shard-0: source journal %s: journal %s: content-type", c.ShardSpec(1).RecoveryLog(), c.ShardSpec(1).RecoveryLog())
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), want) {
		t.Fatalf("Apply of a recovery log as a source: %v, want FailedPrecondition naming %q", err, want)
	}
	must(t, c.ApplyShards(ctx, a, nil))
}
