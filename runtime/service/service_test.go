package service_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gazconsumer/gazconsumer/runtime/membertest"
	"github.com/gazconsumer/gazconsumer/runtime/membertest/sums"
	"github.com/gazconsumer/gazconsumer/runtime/service"
	pb "go.gazette.dev/core/broker/protocol"
	pc "go.gazette.dev/core/consumer/protocol"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

var clusters atomic.Int32

// newCluster returns a cluster of n shards on the shared stack, under a
// name of its own, whose connections close when t ends.
func newCluster(t testing.TB, n int) *sums.Cluster {
	t.Helper()
	var ctx, cancel = context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var c, err = sums.New(ctx, service.SharedStack().Stack, fmt.Sprintf("c%d", clusters.Add(1)), n, t.TempDir(), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	c.DirectFragmentReads = true // TestMain installs the file transport.
	return c
}

// start starts a member of c, killed when t ends if it's still running.
func start(t *testing.T, c *sums.Cluster, id string) *membertest.Member {
	t.Helper()
	var m, err = c.Start(id)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Kill() })
	return m
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func shardClient(t *testing.T, c *sums.Cluster, m *membertest.Member) pc.ShardClient {
	t.Helper()
	var sc, err = c.ShardClient(m.Svc.Endpoint())
	must(t, err)
	return sc
}

// Three members run eight shards with a hot standby each. One member
// crashes while messages flow: once its lease expires, each of its shards
// fails over to its standby, and the final state is exact, as are the
// messages published onward, read back read-committed.
func TestCrashFailsShardsOverToStandbysWithExactState(t *testing.T) {
	var ctx, cancel = context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var c = newCluster(t, 8)
	var members = []*membertest.Member{start(t, c, "member-a"), start(t, c, "member-b"), start(t, c, "member-c")}
	var sc = shardClient(t, c, members[0])

	// An invalid spec is refused and changes nothing.
	var bad = c.ShardSpec(0)
	bad.Sources[0].Journal = c.Input(99)
	if _, err := sc.Apply(ctx, &pc.ApplyRequest{Changes: []pc.ApplyRequest_Change{{Upsert: bad}}}); status.Code(err) != codes.FailedPrecondition ||
		!strings.Contains(err.Error(), c.Input(99).String()) {
		t.Fatalf("applying a spec with a missing source: %v", err)
	}
	if shards, err := c.List(ctx, members[0]); err != nil || len(shards) != 0 {
		t.Fatalf("after a refused Apply: %v, %v", shards, err)
	}

	must(t, c.ApplyShards(ctx, members[0], nil))
	var feedCtx, stopFeed = context.WithCancel(ctx)
	defer stopFeed()
	var feed = c.NewFeed(feedCtx)
	must(t, feed.Publish(800))
	must(t, c.WaitCaughtUp(ctx))
	must(t, c.WaitStandbys(ctx)) // BACKFILL until they tail their logs.

	// Gazette's own gazctl lists the shards through a member's Shard API,
	// each with its primary and its standby.
	var out = gazctl(t, members[0].Svc.Endpoint(), "shards", "list", "--primary", "--replicas")
	for i := range c.Shards {
		if !strings.Contains(out, sums.ShardID(i).String()) {
			t.Errorf("gazctl shards list lacks %s:\n%s", sums.ShardID(i), out)
		}
	}
	for _, want := range []string{"PRIMARY", "STANDBY", "member-a", "member-b", "member-c"} {
		if !strings.Contains(out, want) {
			t.Errorf("gazctl shards list lacks %q:\n%s", want, out)
		}
	}

	// Crash the primary of shard-0 while messages flow.
	var flow = feed.Flow(40)
	must(t, feed.WaitPublished(ctx, feed.Published()+400))
	lost, err := c.PrimaryOf(ctx, sums.ShardID(0))
	must(t, err)
	shards, err := c.List(ctx, lost)
	must(t, err)
	var standbyOf = make(map[pc.ShardID]pb.ProcessSpec_ID) // Of the lost member's primaries.
	for _, s := range shards {
		if s.Route.Primary != -1 && s.Route.Members[s.Route.Primary] == lost.ID() {
			if len(s.Route.Members) != 2 {
				t.Fatalf("shard %s has replicas %v, not a primary and a standby", s.Spec.Id, s.Route.Members)
			}
			standbyOf[s.Spec.Id] = s.Route.Members[1-s.Route.Primary]
		}
	}
	must(t, lost.Kill())
	t.Logf("crashed %s, primary of %d shards", lost.ID().Suffix, len(standbyOf))

	// Each of its shards fails over to its standby, which processes the
	// messages that keep flowing.
	for id, standby := range standbyOf {
		var m, err = c.PrimaryOf(ctx, id)
		must(t, err)
		if m.ID() != standby {
			t.Errorf("shard %s failed over to %s, not to its standby %s", id, m.ID().Suffix, standby.Suffix)
		}
	}
	must(t, feed.WaitPublished(ctx, feed.Published()+400))
	must(t, flow())
	must(t, c.WaitCaughtUp(ctx))
	checkExact(t, ctx, c, feed)
}

// checkExact kills the live members, then checks that the shards' stores hold the
// sums of every message the feed published, and that the output holds each
// of them once, read-committed.
func checkExact(t *testing.T, ctx context.Context, c *sums.Cluster, feed *sums.Feed) {
	t.Helper()
	for _, m := range c.Live() {
		// Kill: a lone member could not hand off its shards (they need two
		// replicas), and the state is committed.
		must(t, m.Kill())
	}
	var want = feed.Want()
	var got, err = c.AllStoreSums(ctx)
	must(t, err)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("stored sums:\n got %v\nwant %v", got, want)
	}
	published, n, err := c.OutputSums(ctx)
	must(t, err)
	if n != feed.Published() || fmt.Sprint(published) != fmt.Sprint(want) {
		t.Errorf("read %d published messages, summing to\n %v\nwant %d summing to\n %v", n, published, feed.Published(), want)
	}
}

// gazctl runs Gazette's gazctl (as `make setup` builds it, or built now)
// against the consumer at ep.
func gazctl(t *testing.T, ep pb.Endpoint, args ...string) string {
	t.Helper()
	var bin, err = filepath.Abs("../../.tools/bin/gazctl")
	must(t, err)
	if _, err = os.Stat(bin); err != nil {
		bin = filepath.Join(t.TempDir(), "gazctl")
		if out, err := exec.Command("go", "build", "-o", bin, "go.gazette.dev/core/cmd/gazctl").CombinedOutput(); err != nil {
			t.Fatalf("building gazctl: %v\n%s", err, out)
		}
	}
	var cmd = exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "CONSUMER_ADDRESS="+ep.URL().String(), "BROKER_ADDRESS=http://127.0.0.1:1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("gazctl %v: %v\n%s", args, err, out)
	}
	return string(out)
}
