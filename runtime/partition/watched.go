package partition

import (
	"context"
	"sync"
	"time"

	"go.gazette.dev/core/broker/client"
	pb "go.gazette.dev/core/broker/protocol"
	"go.gazette.dev/core/message"
)

// Watched lists the journals label selectors select (a runtime.PartitionLister):
// it keeps, for each selector it's asked about, a watch of the journals
// the brokers list for it, so that resolving a partition is a memory read.
type Watched struct {
	ctx   context.Context
	jc    pb.JournalClient
	mu    sync.Mutex
	lists map[string]*client.WatchedList
}

// NewWatched returns a Watched whose watches run until
// ctx is done.
func NewWatched(ctx context.Context, jc pb.JournalClient) *Watched {
	return &Watched{ctx: ctx, jc: jc, lists: make(map[string]*client.WatchedList)}
}

// Partitions returns the current listing of journals matching sel. The first
// call for a selector waits (up to ten seconds) for its first listing.
func (w *Watched) Partitions(sel pb.LabelSelector) message.PartitionsFunc {
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
