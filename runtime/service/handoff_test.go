package service_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gazconsumer/gazconsumer/runtime/membertest"
	"github.com/gazconsumer/gazconsumer/runtime/membertest/sums"
	"github.com/gazconsumer/gazconsumer/runtime/service"
	clientv3 "go.etcd.io/etcd/client/v3"
	pb "go.gazette.dev/core/broker/protocol"
	pc "go.gazette.dev/core/consumer/protocol"
)

// A rolling restart replaces the members one by one, each replacement
// joining before the member it replaces leaves, as a Deployment's surge
// does. Each leaving member hands its shards off: each of its primaries
// passes, in one etcd transaction, to a hot standby that is ready, and the
// member exits only once it holds no shard. Processing never stops for as
// long as a lease takes to expire, and the final state is exact.
func TestRollingRestartHandsShardsOff(t *testing.T) {
	var ctx, cancel = context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var c = newCluster(t, 8)
	// A member which failed to hand off would leave its shards waiting for
	// its lease: make that wait stand out.
	c.LeaseTTL = 20 * time.Second
	c.Handoff = time.Minute

	var old = []*membertest.Member{start(t, c, "member-a"), start(t, c, "member-b"), start(t, c, "member-c")}
	must(t, c.ApplyShards(ctx, old[0], nil))
	var feedCtx, stopFeed = context.WithCancel(ctx)
	defer stopFeed()
	var feed = c.NewFeed(feedCtx)
	must(t, feed.Publish(400))
	must(t, c.WaitCaughtUp(ctx))

	// Record every change of assignments from now on.
	var rev = mustRevision(t, ctx, c)
	var flow = feed.Flow(20)
	var probe = startProbe(ctx, c)

	for i, m := range old {
		var next = start(t, c, fmt.Sprintf("member-%c2", 'a'+i))
		must(t, feed.WaitPublished(ctx, feed.Published()+100))
		if err := m.Stop(); errors.Is(err, service.ErrHandoffTimedOut) {
			t.Fatalf("%s did not hand its shards off: %v", m.ID().Suffix, err)
		} else if err != nil {
			t.Fatalf("stopping %s: %v", m.ID().Suffix, err)
		}
		t.Logf("%s handed its shards off; %s joined", m.ID().Suffix, next.ID().Suffix)
	}
	must(t, feed.WaitPublished(ctx, feed.Published()+200))
	must(t, flow())
	var stall, probes, err = probe()
	must(t, err)
	must(t, c.WaitCaughtUp(ctx))
	t.Logf("longest wait for a message to be processed: %s (of %d probes)", stall, probes)
	if stall >= c.LeaseTTL {
		t.Errorf("processing stopped for %s, as long as a lease takes to expire (%s)", stall, c.LeaseTTL)
	}

	checkPromotions(t, ctx, c, rev, mustRevision(t, ctx, c))
	checkExact(t, ctx, c, feed)
}

func mustRevision(t *testing.T, ctx context.Context, c *sums.Cluster) int64 {
	t.Helper()
	var resp, err = c.Stack.Etcd().Get(ctx, "/", clientv3.WithCountOnly())
	must(t, err)
	return resp.Header.Revision
}

// startProbe measures, again and again for each shard, how long the
// shard's primary takes to process its source through the write head of
// the moment. Stopping it returns the longest of those waits.
func startProbe(ctx context.Context, c *sums.Cluster) (stop func() (time.Duration, int, error)) {
	var done = make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	var longest time.Duration
	var probes int
	var errs []error
	for i := range c.Shards {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				var began = time.Now()
				var offset, err = membertest.WriteHead(ctx, c.Stack.Journals(), c.Input(i))
				if err == nil {
					err = c.WaitReadThrough(ctx, sums.ShardID(i), pb.Offsets{c.Input(i): offset})
				}
				mu.Lock()
				if err != nil {
					errs = append(errs, fmt.Errorf("probing %s: %w", sums.ShardID(i), err))
				} else {
					longest = max(longest, time.Since(began))
					probes++
				}
				mu.Unlock()
				if err != nil {
					return
				}
			}
		}()
	}
	return func() (time.Duration, int, error) {
		close(done)
		wg.Wait()
		return longest, probes, errors.Join(errs...)
	}
}

// checkPromotions checks every promotion of a replica to primary made
// between revisions from and to: the replica was a ready hot standby, and
// the assignment of the primary it replaced was removed by the same etcd
// transaction, so that the shard never lacked a primary.
func checkPromotions(t *testing.T, ctx context.Context, c *sums.Cluster, from, to int64) {
	t.Helper()
	var prefix = c.Prefix + "/assign/"
	var wctx, cancel = context.WithCancel(ctx)
	defer cancel()
	var wch = c.Stack.Etcd().Watch(wctx, prefix, clientv3.WithPrefix(), clientv3.WithRev(from+1), clientv3.WithProgressNotify())
	// Ask for progress notifications, which tell when the watch has passed
	// revision to even if no assignment changed there.
	go func() {
		for wctx.Err() == nil {
			_ = c.Stack.Etcd().RequestProgress(wctx)
			select {
			case <-wctx.Done():
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()

	type change struct {
		deletedPrimary map[string]bool // By shard.
		promoted       map[string]*pc.ReplicaStatus
	}
	var byRev = make(map[int64]*change)
	var at = func(rev int64) *change {
		if byRev[rev] == nil {
			byRev[rev] = &change{deletedPrimary: map[string]bool{}, promoted: map[string]*pc.ReplicaStatus{}}
		}
		return byRev[rev]
	}
	for resp := range wch {
		must(t, resp.Err())
		var last int64
		for _, ev := range resp.Events {
			var shard, slot = parseAssignment(t, strings.TrimPrefix(string(ev.Kv.Key), prefix))
			last = ev.Kv.ModRevision
			if slot != 0 {
				continue
			}
			switch {
			case ev.Type == clientv3.EventTypeDelete:
				at(ev.Kv.ModRevision).deletedPrimary[shard] = true
			case ev.IsCreate():
				var st = new(pc.ReplicaStatus)
				must(t, st.Unmarshal(ev.Kv.Value))
				at(ev.Kv.ModRevision).promoted[shard] = st
			}
		}
		if last >= to || resp.IsProgressNotify() && resp.Header.Revision >= to {
			break
		}
	}
	var promotions int
	for rev, ch := range byRev {
		if rev > to {
			continue
		}
		for shard, st := range ch.promoted {
			promotions++
			if st.Code != pc.ReplicaStatus_STANDBY {
				t.Errorf("revision %d promoted a replica of %s which was %s, not a ready standby", rev, shard, st.Code)
			}
			if !ch.deletedPrimary[shard] {
				t.Errorf("revision %d promoted a replica of %s, but did not remove its former primary: the shard was without one", rev, shard)
			}
		}
	}
	t.Logf("checked %d promotions", promotions)
	if promotions == 0 {
		t.Error("no shard changed primary during the rolling restart")
	}
}

// parseAssignment parses an assignment key ITEM#ZONE#SUFFIX#SLOT.
func parseAssignment(t *testing.T, key string) (string, int) {
	var parts = strings.Split(key, "#")
	if len(parts) != 4 {
		t.Fatalf("unexpected assignment key %q", key)
	}
	var slot, err = strconv.Atoi(parts[3])
	must(t, err)
	return parts[0], slot
}
