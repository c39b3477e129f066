package service_test

import (
	"context"
	"testing"
	"time"

	"github.com/gazconsumer/gazconsumer/runtime/partition"
	pb "go.gazette.dev/core/broker/protocol"
)

func TestWatchedListsSelectedJournals(t *testing.T) {
	var ctx, cancel = context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var c = newCluster(t, 2)
	var stack = c.Stack

	// Stop watching before the stack closes: brokers drain open watches.
	var watchCtx, stopWatching = context.WithCancel(ctx)
	defer stopWatching()
	var wp = partition.NewWatched(watchCtx, stack.Journals())
	var sel, _ = pb.ParseLabelSelector("prefix=" + c.Name + "/input/")
	var list = wp.Partitions(sel)()
	if len(list.Journals) != 2 || list.Journals[0].Spec.Name != c.Input(0) || list.Journals[1].Spec.Name != c.Input(1) {
		t.Fatalf("listed %v", list.Journals)
	}
	// A second ask of the same selector shares the watch.
	if again := wp.Partitions(sel)(); len(again.Journals) != 2 {
		t.Fatalf("listed %d journals the second time", len(again.Journals))
	}
}
