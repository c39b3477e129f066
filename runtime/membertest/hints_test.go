package membertest_test

import (
	"context"
	"testing"
	"time"

	"github.com/gazconsumer/gazconsumer/devstack/devstacktest"
	"github.com/gazconsumer/gazconsumer/recoverylog"
	"github.com/gazconsumer/gazconsumer/runtime/membertest"
	"github.com/gazconsumer/gazconsumer/runtime/membertest/sums"
)

// A primary stores its recovery log's hints as it starts, then as its log
// grows past them by more than HintsGrowth of their live bytes, long before
// its HintsInterval: once the log stops growing, a recovery from the stored
// hints reads at most that much past them. With HintsGrowth negative it
// stores them only as it starts (and every HintsInterval, an hour here).
func TestHintsFollowTheLogsGrowth(t *testing.T) {
	for _, tc := range []struct {
		name   string
		growth float64
	}{{"by growth", 0}, {"off", -1}} {
		t.Run(tc.name, func(t *testing.T) {
			const floor = 256 << 10
			var ctx, cancel = context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			var stack = devstacktest.StartT(t, "")
			var c, err = sums.New(ctx, stack.Stack, "hg", 1, t.TempDir(), 1<<20)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.HintsInterval, c.HintsGrowth, c.MinHintsGrowth = time.Hour, tc.growth, floor

			var m *membertest.Member
			if m, err = c.Start("member-a"); err != nil {
				t.Fatal(err)
			}
			defer m.Kill()
			if err = c.ApplyShards(ctx, m, nil); err != nil {
				t.Fatal(err)
			}
			var spec = c.ShardSpec(0)
			var hints = func() *recoverylog.Hints {
				t.Helper()
				var all, err = recoverylog.FetchHints(ctx, stack.Etcd(), spec.HintPrimaryKey(), 1)
				if err != nil {
					t.Fatal(err)
				}
				return all[0]
			}
			var feed = c.NewFeed(ctx)
			feed.Pad = 4 << 10
			if err = feed.Publish(20); err != nil {
				t.Fatal(err)
			} else if err = c.WaitCaughtUp(ctx); err != nil {
				t.Fatal(err)
			}
			var first *recoverylog.Hints
			for first = hints(); first == nil; first = hints() {
				if ctx.Err() != nil {
					t.Fatal("the primary stored no hints as it started")
				}
				time.Sleep(membertest.PollInterval)
			}

			// Some 4 MB of rows, each written to the log.
			for range 10 {
				if err = feed.Publish(100); err != nil {
					t.Fatal(err)
				} else if err = c.WaitCaughtUp(ctx); err != nil {
					t.Fatal(err)
				}
			}
			if tc.growth < 0 {
				time.Sleep(2 * time.Second)
				if h := hints(); h.NextOffset != first.NextOffset {
					t.Fatalf("hints moved from offset %d to %d, not by growth", first.NextOffset, h.NextOffset)
				}
				return
			}
			// The hints catch up with the log: what a recovery reads past
			// them is within the growth allowed.
			for {
				var h = hints()
				var head, err = membertest.WriteHead(ctx, stack.Journals(), spec.RecoveryLog())
				if err != nil {
					t.Fatal(err)
				}
				var live = recoverylog.StatsOf(h).LiveBytes
				var past = head - h.NextOffset
				if h.NextOffset > first.NextOffset+(2<<20) && past <= max(live/5, floor) {
					t.Logf("hints at %d (from %d at the start), %d bytes live; the log's head %d", h.NextOffset, first.NextOffset, live, head)
					break
				} else if ctx.Err() != nil {
					t.Fatalf("the stored hints end at %d (from %d at the start), %d bytes past them to the log's head %d; %d bytes live",
						h.NextOffset, first.NextOffset, past, head, live)
				}
				time.Sleep(membertest.PollInterval)
			}
		})
	}
}
