package membertest_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/gazconsumer/gazconsumer/devstack/devstacktest"
	"github.com/gazconsumer/gazconsumer/runtime/membertest"
	"github.com/gazconsumer/gazconsumer/runtime/membertest/sums"
	pb "go.gazette.dev/core/broker/protocol"
	pc "go.gazette.dev/core/consumer/protocol"
)

func TestMain(m *testing.M) {
	slog.SetLogLoggerLevel(devstacktest.LogLevel())
	var code = m.Run()
	os.Exit(devstacktest.LeakChecked(code))
}

// Members start, take a shard with a hot standby, and fail it over when
// the primary is killed; a stopped member hands its shard off. The sums
// the shard committed are exact throughout.
func TestClusterFailsOverAndHandsOff(t *testing.T) {
	var ctx, cancel = context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var stack = devstacktest.StartT(t, "")
	var c, err = sums.New(ctx, stack.Stack, "mt", 1, t.TempDir(), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.LeaseTTL = 2 * time.Second

	var a, b *membertest.Member
	if a, err = c.Start("member-a"); err != nil {
		t.Fatal(err)
	}
	defer a.Kill()
	if b, err = c.Start("member-b"); err != nil {
		t.Fatal(err)
	}
	defer b.Kill()
	if err = c.ApplyShards(ctx, a, nil); err != nil {
		t.Fatal(err)
	}
	var feed = c.NewFeed(ctx)
	var step = func(what string) *membertest.Member {
		t.Helper()
		if err := feed.Publish(20); err != nil {
			t.Fatal(err)
		}
		if err := c.WaitCaughtUp(ctx); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		var p, err = c.PrimaryOf(ctx, sums.ShardID(0))
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return p
	}
	var primary = step("first")
	var standby = a
	if primary == a {
		standby = b
	}
	if _, err = c.WaitStatus(ctx, sums.ShardID(0), standby.ID(), pc.ReplicaStatus_STANDBY); err != nil {
		t.Fatal(err)
	}

	if err = primary.Kill(); err != nil {
		t.Fatal(err)
	}
	if len(c.Live()) != 1 {
		t.Fatalf("%d members live after a kill", len(c.Live()))
	}
	if _, err = c.WaitStatus(ctx, sums.ShardID(0), standby.ID(), pc.ReplicaStatus_PRIMARY); err != nil {
		t.Fatal(err)
	}
	if p := step("after the kill"); p != standby {
		t.Fatalf("the primary after the kill is %s, not the standby %s", p.ID().Suffix, standby.ID().Suffix)
	}

	// Two members join, one of which becomes the standby; the primary,
	// stopped, hands off to it. (The allocator keeps as many members as a
	// shard has replicas: two besides the one leaving.)
	var joined []*membertest.Member
	for _, id := range []string{"member-c", "member-d"} {
		var m, err = c.Start(id)
		if err != nil {
			t.Fatal(err)
		}
		defer m.Kill()
		joined = append(joined, m)
	}
	var shards, _ = c.List(ctx, joined[0])
	var ready = func() bool {
		return len(shards) == 1 && len(shards[0].Route.Members) == 2 && shards[0].Route.Primary != -1 &&
			shards[0].Status[1-shards[0].Route.Primary].Code == pc.ReplicaStatus_STANDBY
	}
	for !ready() {
		if ctx.Err() != nil {
			t.Fatalf("no new standby: %v", shards)
		}
		time.Sleep(membertest.PollInterval)
		shards, _ = c.List(ctx, joined[0])
	}
	var next = shards[0].Route.Members[1-shards[0].Route.Primary]
	if err = standby.Stop(); err != nil {
		t.Fatalf("stopping %s: %v", standby.ID().Suffix, err)
	}
	if p := step("after the hand-off"); p.ID() != next {
		t.Fatalf("the primary after the hand-off is %s, not the standby %s", p.ID().Suffix, next.Suffix)
	}
	head, err := membertest.WriteHead(ctx, stack.Journals(), c.Input(0))
	if err != nil {
		t.Fatal(err)
	}
	if err = c.WaitReadThrough(ctx, sums.ShardID(0), pb.Offsets{c.Input(0): head}); err != nil {
		t.Fatal(err)
	}
	for _, m := range c.Live() {
		if err = m.Kill(); err != nil {
			t.Fatal(err)
		}
	}
	got, err := c.AllStoreSums(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != fmt.Sprint(feed.Want()) {
		t.Errorf("stored sums %v, want %v", got, feed.Want())
	}
}
