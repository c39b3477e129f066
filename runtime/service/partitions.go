package service

import (
	"context"
	"sync"
	"time"

	"github.com/gazconsumer/gazconsumer/runtime"
	"go.gazette.dev/core/broker/client"
	pb "go.gazette.dev/core/broker/protocol"
	"go.gazette.dev/core/message"
)

// WatchedPartitions is a runtime.PartitionLister that keeps, for each label
// selector it's asked about, a watch of the journals the brokers list for
// it: resolving a partition is then a memory read.
type WatchedPartitions struct {
	ctx   context.Context
	jc    pb.JournalClient
	mu    sync.Mutex
	lists map[string]*client.WatchedList
}

var _ runtime.PartitionLister = (*WatchedPartitions)(nil)

// NewWatchedPartitions returns a WatchedPartitions whose watches run until
// ctx is done.
func NewWatchedPartitions(ctx context.Context, jc pb.JournalClient) *WatchedPartitions {
	return &WatchedPartitions{ctx: ctx, jc: jc, lists: make(map[string]*client.WatchedList)}
}

// Partitions returns the current listing of journals matching sel. The first
// call for a selector waits (up to ten seconds) for its first listing.
func (w *WatchedPartitions) Partitions(sel pb.LabelSelector) message.PartitionsFunc {
	var key = sel.String()
	w.mu.Lock()
	var wl, ok = w.lists[key]
	if !ok {
		wl = client.NewWatchedList(w.ctx, w.jc, pb.ListRequest{Selector: sel}, nil)
		w.lists[key] = wl
	}
	w.mu.Unlock()

	if !ok {
		select {
		case <-wl.UpdateCh():
		case <-time.After(10 * time.Second):
		case <-w.ctx.Done():
		}
	}
	return func() *pb.ListResponse {
		if l := wl.List(); l != nil {
			return l
		}
		return new(pb.ListResponse) // No listing yet: no partitions.
	}
}
