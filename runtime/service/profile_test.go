package service_test

import (
	"bytes"
	"context"
	"runtime/pprof"
	"strings"
	"testing"
	"time"
)

// A shard's goroutines carry its id as a profiler label, so that a
// member's CPU profile breaks down by shard.
func TestProfilesAreLabeledByShard(t *testing.T) {
	var ctx, cancel = context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var c = newCluster(t, 1)
	var a = start(t, c, "member-a")
	must(t, c.ApplyShards(ctx, a, nil))
	must(t, c.NewFeed(ctx).Publish(10))
	must(t, c.WaitCaughtUp(ctx))

	// A goroutine profile of debug=1 gives each stack's labels.
	var buf bytes.Buffer
	must(t, pprof.Lookup("goroutine").WriteTo(&buf, 1))
	var labeled, pipeline bool
	for _, stack := range strings.Split(buf.String(), "\n\n") {
		if !strings.Contains(stack, `# labels: {"shard":"shard-0"}`) {
			continue
		}
		labeled = true
		pipeline = pipeline || strings.Contains(stack, "txn.(*Pipeline).Run")
	}
	if !labeled || !pipeline {
		t.Fatalf("no goroutine of shard-0's transactions is labeled shard=shard-0 (labeled %v, its pipeline %v):\n%s", labeled, pipeline, buf.String())
	}
}
