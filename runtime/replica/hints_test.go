package replica_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/gazconsumer/gazconsumer/devstack/devstacktest"
	"github.com/gazconsumer/gazconsumer/recoverylog"
	"github.com/gazconsumer/gazconsumer/runtime/membertest"
	"github.com/gazconsumer/gazconsumer/runtime/membertest/sums"
	"github.com/gazconsumer/gazconsumer/store/rocks/membudget"
)

func TestMain(m *testing.M) {
	slog.SetLogLoggerLevel(devstacktest.LogLevel())
	// Memtables of 8 MiB: the stores flush, and their write-ahead logs die,
	// within a few MiB of rows.
	var budget = membudget.Default()
	budget.Bytes = membudget.MinBytes
	if err := membudget.SetMember(budget); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	var code = m.Run()
	os.Exit(devstacktest.LeakChecked(code))
}

// A primary stores its recovery log's hints as it starts, then, long
// before its HintsInterval, as a recovery from them comes to read more
// than the live state (its store flushes memtables, whose write-ahead logs
// the hints name, to smaller tables): once the log stops growing, a
// recovery reads at most HintsGrowth of the live state more than it. With
// HintsGrowth negative it stores them only as it starts (and every
// HintsInterval, an hour here), and a recovery reads the log's history.
func TestHintsFollowTheLog(t *testing.T) {
	for _, tc := range []struct {
		name   string
		growth float64
	}{{"as it grows", 0}, {"off", -1}} {
		t.Run(tc.name, func(t *testing.T) {
			const floor = 256 << 10
			var ctx, cancel = context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			var stack = devstacktest.StartT(t, "")
			var c, err = sums.New(ctx, stack.Stack, "hints", 1, t.TempDir(), 1<<20)
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
			feed.Pad = 16 << 10
			if err = feed.Publish(10); err != nil {
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

			// Some 32 MB of rows of 7 keys, written to the log, four
			// memtables' worth.
			for range 10 {
				if err = feed.Publish(200); err != nil {
					t.Fatal(err)
				} else if err = c.WaitCaughtUp(ctx); err != nil {
					t.Fatal(err)
				}
			}
			// What a recovery from the stored hints reads, to the log's head.
			var read = func(h *recoverylog.Hints) (read, live, head int64) {
				t.Helper()
				var err error
				if head, err = membertest.WriteHead(ctx, stack.Journals(), spec.RecoveryLog()); err != nil {
					t.Fatal(err)
				}
				var st = recoverylog.StatsOf(h)
				return st.HintedBytes + head - h.NextOffset, st.LiveBytes, head
			}
			if tc.growth < 0 {
				time.Sleep(2 * time.Second)
				var h = hints()
				if h.NextOffset != first.NextOffset {
					t.Fatalf("hints moved from offset %d to %d, though not every interval nor by growth", first.NextOffset, h.NextOffset)
				}
				if r, _, head := read(h); r < head*9/10 {
					t.Fatalf("a recovery reads %d bytes of a log of %d", r, head)
				}
				return
			}
			for {
				var h = hints()
				var r, live, head = read(h)
				if r <= live+max(live/5, floor) && r < head/2 {
					t.Logf("hints at %d (at %d as the primary started); a recovery reads %d bytes of a log of %d, %d bytes live",
						h.NextOffset, first.NextOffset, r, head, live)
					break
				} else if ctx.Err() != nil {
					t.Fatalf("hints at %d (at %d as the primary started); a recovery reads %d bytes of a log of %d, %d bytes live",
						h.NextOffset, first.NextOffset, r, head, live)
				}
				time.Sleep(membertest.PollInterval)
			}
		})
	}
}
