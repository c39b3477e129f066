package service_test

import (
	"context"
	"testing"
	"time"

	"github.com/gazconsumer/gazconsumer/runtime/membertest"
	"github.com/gazconsumer/gazconsumer/runtime/membertest/sums"
	pb "go.gazette.dev/core/broker/protocol"
	pc "go.gazette.dev/core/consumer/protocol"
)

// Stat reports the offsets a shard read through and those it published at,
// and a shard recovered by another member, with no input after it, reports
// itself caught up with what its checkpoint read: its progress starts at
// the recovered checkpoint.
func TestStatAfterRestart(t *testing.T) {
	var ctx, cancel = context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var c = newCluster(t, 1)
	c.Handoff = 10 * time.Second
	var a = start(t, c, "member-a")
	var edit = func(s *pc.ShardSpec) { s.HotStandbys = 0 }
	must(t, c.ApplyShards(ctx, a, edit))

	var feed = c.NewFeed(ctx)
	must(t, feed.Publish(50))
	var head, err = membertest.WriteHead(ctx, c.Stack.Journals(), c.Input(0))
	must(t, err)

	var stat = func(m *membertest.Member) *pc.StatResponse {
		t.Helper()
		var statCtx, cancel = context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		var resp, err = shardClient(t, c, m).Stat(statCtx, &pc.StatRequest{Shard: sums.ShardID(0), ReadThrough: pb.Offsets{c.Input(0): head}})
		if err != nil {
			t.Fatalf("Stat of %s: %v", m.ID().Suffix, err)
		} else if resp.Status != pc.Status_OK {
			t.Fatalf("Stat of %s: %v", m.ID().Suffix, resp.Status)
		}
		return resp
	}
	if _, err = c.PrimaryOf(ctx, sums.ShardID(0)); err != nil {
		t.Fatal(err)
	}
	var resp = stat(a)
	if got := resp.ReadThrough[c.Input(0)]; got < head {
		t.Errorf("read through %d, want at least %d", got, head)
	}
	outHead, err := membertest.WriteHead(ctx, c.Stack.Journals(), c.Output())
	must(t, err)
	if got := resp.PublishAt[c.Output()]; got <= 0 || got > outHead {
		t.Errorf("published at %d of %s, whose write head is %d", got, c.Output(), outHead)
	}

	// Another member takes the shard over; nothing more is published.
	var b = start(t, c, "member-b")
	must(t, a.Stop())
	if m, err := c.PrimaryOf(ctx, sums.ShardID(0)); err != nil || m != b {
		t.Fatalf("primary %v (%v), want member-b", m, err)
	}
	resp = stat(b)
	if got := resp.ReadThrough[c.Input(0)]; got < head {
		t.Errorf("after the restart, read through %d, want at least %d", got, head)
	}
}
