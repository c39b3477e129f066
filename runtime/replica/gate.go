package replica

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	pc "go.gazette.dev/core/consumer/protocol"
)

// A primary splitting its state for a rescale yields its processors: its
// readers hold their reads, so that its open transaction finishes, and
// splits, at once rather than after its longest duration (until that
// transaction has started its commit), and, if the
// member is so configured (Config.ForkYield), so that the new shards
// forking from its store in this member, while they do, have the
// processors its consumption would take. Holds are short and bounded (a
// fork of a large state takes as long as it takes, but its parent goes on
// after Config.ForkYield).

// splitYield bounds how long a primary's readers hold their reads once its
// spec asks it to split, until a transaction finalized since starts its
// commit.
const splitYield = 2 * time.Second

// readGate holds a primary's readers while any hold is taken.
type readGate struct {
	held atomic.Int32 // Holds taken and not released.

	mu   sync.Mutex
	open chan struct{} // Closed when held falls to zero; replaced when it rises.
}

// hold takes a hold, released by the returned function (once: later calls
// do nothing) or after at most d, whichever is first.
func (g *readGate) hold(d time.Duration) (release func()) {
	g.mu.Lock()
	if g.held.Add(1) == 1 || g.open == nil {
		g.open = make(chan struct{})
	}
	g.mu.Unlock()

	var once sync.Once
	var done = func() {
		once.Do(func() {
			g.mu.Lock()
			if g.held.Add(-1) == 0 {
				close(g.open)
			}
			g.mu.Unlock()
		})
	}
	var timer = time.AfterFunc(d, done)
	return func() { timer.Stop(); done() }
}

// wait returns at once unless a hold is taken, and else once none is, or
// ctx's error once it's done.
func (g *readGate) wait(ctx context.Context) error {
	if g.held.Load() == 0 {
		return nil
	}
	g.mu.Lock()
	var open = g.open
	var held = g.held.Load() != 0
	g.mu.Unlock()
	if !held {
		return nil
	}
	select {
	case <-open:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// splitHold is the hold a primary takes when its spec asks it to split, and
// releases once a transaction that began to finalize after it has started
// its commit: that transaction split, and the next may go on consuming (it
// writes nothing of what the new shards own, so they may fork from any
// commit from the split's on), while the split commits.
type splitHold struct {
	mu      sync.Mutex
	since   time.Time // When taken; zero if none is.
	release func()
	held    atomic.Bool   // Whether since is set, read without mu.
	taking  chan struct{} // Closed as the hold is taken; nil until asked for, and once released.
}

// hurried returns a channel closed once the hold is taken (at once, if it
// is): the primary's pipeline waits on it (txn.Pipeline.Hurried).
func (h *splitHold) hurried() <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.taking == nil {
		h.taking = make(chan struct{})
		if !h.since.IsZero() {
			close(h.taking)
		}
	}
	return h.taking
}

// take takes the hold of the primary of shard id on g, unless one is
// taken.
func (h *splitHold) take(g *readGate, id pc.ShardID) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.since.IsZero() {
		return
	}
	h.since, h.release = time.Now(), g.hold(splitYield)
	h.held.Store(true)
	if h.taking != nil {
		close(h.taking)
	}
	slog.Debug("primary holds its reads until it splits its state", "shard", id)
}

// taken reports whether the hold is taken: the primary has yet to start
// the commit of its split. Its open transaction then hurries
// (txn.Pipeline.Hurry): it takes no more reads, splits, and starts its
// commit without waiting for its predecessor's.
func (h *splitHold) taken() bool { return h.held.Load() }

// finalized releases the hold if the transaction which has started its
// commit, and began to finalize at began, did so after the hold was taken:
// it split.
func (h *splitHold) finalized(began time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.since.IsZero() && began.After(h.since) {
		h.release()
		h.since, h.release = time.Time{}, nil
		h.held.Store(false)
		h.taking = nil // The next hold closes a new one.
	}
}
