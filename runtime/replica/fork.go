package replica

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/gazconsumer/gazconsumer/recoverylog"
	"github.com/gazconsumer/gazconsumer/runtime"
	"github.com/gazconsumer/gazconsumer/runtime/source"
	"go.gazette.dev/core/allocator"
	pb "go.gazette.dev/core/broker/protocol"
	pc "go.gazette.dev/core/consumer/protocol"
	"go.gazette.dev/core/keyspace"
)

// forkRetry is the wait between a new shard's tries to fork from a shard
// which has not split yet: a read of the other's record in its store, or a
// play of the other's recovery log on from where the last play ended.
const forkRetry = 250 * time.Millisecond

// forkIfNew builds the first state of a shard made by a rescale (labeled
// runtime.LabelSplitFrom) from that of the shard it's split from, unless
// its store has a state already. If the other's primary runs in this
// member, it links the other's files, once its split is durable, and opens
// the store on them anew (if the application is a runtime.LinkForker), or
// else reads the other's store; else it plays the other's recovery log into
// a directory beside dir, without fencing it, and hands it to the
// application's Fork. Until the other shard has committed its split, it
// tries again every forkRetry (playing the log on from where it ended), and
// as soon as a local parent commits. It returns the store to go on with:
// store, or the one opened on the links.
func (s *Replica) forkIfNew(dir string, rec runtime.Recorder, store runtime.Store) (runtime.Store, error) {
	var spec = s.Spec()
	var from = pc.ShardID(spec.LabelSet.ValueOf(runtime.LabelSplitFrom))
	if from == "" {
		return store, nil
	}
	var forker, ok = s.host.App.(runtime.Forker)
	if !ok {
		return store, fmt.Errorf("shard %s: labeled %s=%s, but application %T can't fork shards", spec.Id, runtime.LabelSplitFrom, from, s.host.App)
	}
	if need, err := forker.NeedsFork(s, store); err != nil || !need {
		return store, err
	}
	var linker, canLink = s.host.App.(runtime.LinkForker)
	if canLink {
		// Its store holds links of the other's files already, if linkIfNew
		// linked them, or its last primary did and ended before it forked.
		if linked, err := linker.ForkLinked(s, store); err == nil && linked {
			return store, nil
		} else if err != nil && !errors.Is(err, runtime.ErrParentNotSplit) {
			return store, err
		} else if err != nil {
			// Linked as of before the split: link them again.
			slog.Warn("the shard's store holds its parent's state as of before its split: it forks again", "shard", spec.Id, "from", from, "err", err)
			store.Destroy()
			if store, err = s.reopenEmpty(rec); err != nil {
				return nil, fmt.Errorf("shard %s: %w", spec.Id, err)
			}
		}
	}
	var lf *logFork // Of the plays of the other's log.
	defer func() { lf.close(spec.Id) }()
	for logged := false; ; logged = true {
		var began = time.Now()
		var err error
		var parentCommitted <-chan struct{} // Of a local parent: its next commit.
		if parent, sr := s.localParent(from); sr != nil {
			_, _, parentCommitted = parent.Progress()
			if canLink && !s.host.ForkCopiesRows {
				store, err = s.linkFork(linker, parent, rec, store)
				switch {
				case err == nil:
					slog.Info("shard forked from links of the files of its parent's primary, in this member", "shard", spec.Id, "from", from,
						"took", time.Since(began))
					return store, nil
				case store == nil:
					return nil, err
				case errors.Is(err, runtime.ErrNotLinkable):
					slog.Warn("the shard can't fork from links of its parent's files: it copies the rows it owns", "shard", spec.Id,
						"from", from, "err", err)
					canLink, err = false, nil
				case !errors.Is(err, runtime.ErrParentNotSplit):
					return store, err
				}
			}
			if err == nil {
				// The parent yields its processors while this shard reads
				// its state and loads its share, if the member says so.
				var yielding = &yieldingParent{StateReader: sr, parent: parent, yield: s.host.ForkYield}
				err = forker.ForkFrom(s, store, yielding)
				yielding.done()
				if err == nil {
					slog.Info("shard forked from the store of its parent's primary, in this member", "shard", spec.Id, "from", from,
						"took", time.Since(began))
					return store, nil
				} else if !errors.Is(err, runtime.ErrParentNotSplit) {
					slog.Warn("forking from the store of the parent's primary failed: playing its recovery log", "shard", spec.Id,
						"from", from, "err", err)
					store, err = s.fork(&lf, dir+"-fork", rec, store, forker, from)
				}
			}
		} else {
			store, err = s.fork(&lf, dir+"-fork", rec, store, forker, from)
		}
		if store == nil {
			return nil, err
		}
		if err == nil {
			return store, nil
		} else if !errors.Is(err, runtime.ErrParentNotSplit) {
			return store, err
		} else if err = s.awaitSplit(from, err, logged, parentCommitted); err != nil {
			return store, err
		}
	}
}

// awaitSplit waits before a new shard tries again to fork from shard from,
// which had not split (the error of the last try is notSplit): until
// parentCommitted is closed (a local parent's next commit, perhaps its
// split; nil if none) or forkRetry passed. It logs the first wait (logged is
// false), and returns the error of the replica's context if it ends first.
func (s *Replica) awaitSplit(from pc.ShardID, notSplit error, logged bool, parentCommitted <-chan struct{}) error {
	if !logged {
		slog.Info("waiting for the shard to fork from to split its state", "shard", s.Spec().Id, "from", from, "err", notSplit, "retryEvery", forkRetry)
	}
	select {
	case <-s.ctx.Done():
		return s.ctx.Err()
	case <-parentCommitted:
	case <-time.After(forkRetry):
	}
	return nil
}

// reopenEmpty removes what the shard's directory holds, and its record in
// rec, and opens an empty store on it: a new shard whose links of its
// parent's files can't serve forks otherwise.
func (s *Replica) reopenEmpty(rec runtime.Recorder) (runtime.Store, error) {
	if err := removeRecorded(rec); err != nil {
		return nil, fmt.Errorf("removing what it linked of its parent's files: %w", err)
	}
	var store, err = s.host.App.NewStore(s, rec)
	if err != nil {
		return nil, fmt.Errorf("opening its store again, empty: %w", err)
	}
	return store, nil
}

// linkIfNew links the files of the shard this one is split from into its
// directory before its store is first opened, if it's a new shard of a
// rescale (labeled runtime.LabelSplitFrom) whose directory is empty, the
// other's primary runs in this member, and the application is a
// runtime.LinkForker: once the other has split (it waits for that as
// forkIfNew does), the store opened next holds the other's state, which
// forkIfNew forks. It returns whether it linked them; if it did not, or
// the link failed, forkIfNew forks otherwise. Opening an empty store
// first, only to replace it, would cost its files' creation.
func (s *Replica) linkIfNew(rec runtime.Recorder) (bool, error) {
	var spec = s.Spec()
	var from = pc.ShardID(spec.LabelSet.ValueOf(runtime.LabelSplitFrom))
	var linker, ok = s.host.App.(runtime.LinkForker)
	if from == "" || !ok || s.host.ForkCopiesRows || s.host.ForkFromLog {
		return false, nil
	} else if entries, err := os.ReadDir(rec.Dir()); err != nil || len(entries) != 0 {
		return false, err // It has recovered files: forkIfNew decides.
	}
	for logged := false; ; logged = true {
		var began = time.Now()
		var parent, _ = s.localParent(from)
		if parent == nil {
			return false, nil
		}
		var ps, ok = parent.servingStore().(runtime.Store)
		if !ok {
			return false, nil
		}
		var _, _, committed = parent.Progress()
		var err = linker.LinkFork(s, ps, rec, func() {})
		switch {
		case err == nil:
			slog.Info("shard linked the files of its parent's primary, in this member", "shard", spec.Id, "from", from,
				"took", time.Since(began))
			return true, nil
		case !errors.Is(err, runtime.ErrParentNotSplit):
			slog.Warn("the shard can't fork from links of its parent's files", "shard", spec.Id, "from", from, "err", err)
			if err = removeRecorded(rec); err != nil {
				return false, fmt.Errorf("shard %s: removing what it linked of its parent's files: %w", spec.Id, err)
			}
			return false, nil
		}
		if err = s.awaitSplit(from, err, logged, committed); err != nil {
			return false, err
		}
	}
}

// removeRecorded removes the files of rec's directory, and, if rec is a
// recovery log's Recorder, records their removal.
func removeRecorded(rec runtime.Recorder) error {
	if r, ok := rec.(*recoverylog.Recorder); ok {
		return r.RemoveAll()
	} else if err := os.RemoveAll(rec.Dir()); err != nil {
		return err
	}
	return os.MkdirAll(rec.Dir(), 0o750)
}

// linkFork builds the shard's first state from links of the files of its
// parent's store, in place of store, which holds nothing yet: once the
// parent's split is written to its files, it destroys store, links the
// files, and, once they and the split are durable, opens the store on them
// and forks it (see runtime.LinkForker). It returns the
// store to go on with: store, if it did not destroy it; else the one
// opened on the links, or, if the link failed, an empty one, with an error
// wrapping runtime.ErrNotLinkable; or nil and the error failing the shard.
func (s *Replica) linkFork(linker runtime.LinkForker, parent *Replica, rec runtime.Recorder, store runtime.Store) (runtime.Store, error) {
	var spec = s.Spec()
	var ps, ok = parent.servingStore().(runtime.Store)
	if !ok {
		return store, fmt.Errorf("shard %s: %w: its parent's store is not served", spec.Id, runtime.ErrNotLinkable)
	}
	var began, released = time.Now(), time.Time{}
	var err = linker.LinkFork(s, ps, rec, func() {
		released = time.Now()
		store.Destroy()
	})
	if released.IsZero() {
		return store, err
	} else if err != nil {
		// Open an empty store again, to fork from a copy of the rows.
		var again, oerr = s.reopenEmpty(rec)
		if oerr != nil {
			return nil, fmt.Errorf("shard %s: linking its parent's files failed (%v), then %w", spec.Id, err, oerr)
		}
		return again, fmt.Errorf("%w: %w", runtime.ErrNotLinkable, err)
	}
	var linked = time.Now()
	if store, err = s.host.App.NewStore(s, rec); err != nil {
		return nil, fmt.Errorf("shard %s: opening its store on the files linked from its parent: %w", spec.Id, err)
	}
	var opened = time.Now()
	if ok, err := linker.ForkLinked(s, store); err != nil {
		return store, err
	} else if !ok {
		return store, fmt.Errorf("shard %s: its store, opened on the files of its parent, does not hold its parent's state", spec.Id)
	}
	slog.Debug("shard linked its parent's files", "shard", spec.Id, "splitRead", released.Sub(began),
		"linkedDurable", linked.Sub(released), "open", opened.Sub(linked), "commit", time.Since(opened))
	return store, nil
}

// localParent returns the primary of shard from and its store, if it runs
// in this member, serves, and its state may be read whole, unless forks
// always play the recovery log (Config.ForkFromLog).
func (s *Replica) localParent(from pc.ShardID) (*Replica, runtime.StateReader) {
	if s.host.ForkFromLog || s.host.Local == nil {
		return nil, nil
	} else if parent := s.host.Local(from); parent != nil {
		var sr, _ = parent.servingStore().(runtime.StateReader)
		return parent, sr
	}
	return nil, nil
}

// yieldingParent is the store of a parent whose primary runs in this
// member: from the read of its state on, until done, its readers hold
// their reads (at most yield).
type yieldingParent struct {
	runtime.StateReader
	parent  *Replica
	yield   time.Duration // Longest hold; none if not positive.
	release func()
}

// ReadState holds the parent's reads, and calls the store's ReadState.
func (y *yieldingParent) ReadState(ctx context.Context, settled []byte, fn func(runtime.Reader) error) error {
	return y.StateReader.ReadState(ctx, settled, func(r runtime.Reader) error {
		if y.release == nil && y.yield > 0 {
			y.release = y.parent.gate.hold(y.yield)
		}
		return fn(r)
	})
}

// done releases the parent's reads.
func (y *yieldingParent) done() {
	if y.release != nil {
		y.release()
	}
}

// logFork is the copy of a parent's files a new shard forks from, played
// from the parent's recovery log into dir, and played on through the log's
// later write heads while the parent has not split yet.
type logFork struct {
	dir    string
	log    pb.Journal
	player *recoverylog.Player
	head   int64 // Played through.
}

// close removes the fork's directory.
func (lf *logFork) close(id pc.ShardID) {
	if lf == nil {
		return
	} else if err := os.RemoveAll(lf.dir); err != nil {
		slog.Warn("removing the directory of a fork", "shard", id, "dir", lf.dir, "err", err)
	}
}

// fork forks store from the files of shard from, played from its recovery
// log into dir through the log's write head: the copy *lf plays, played on
// through the log's new head if there is one (the parent had not split
// when it was played last), or a new one. If the application is a
// runtime.LinkForker, the store is opened anew on the copy's files, which
// its recovery log adopts from the parent's (see adoptPlayed); else the
// application's Fork copies the rows the shard owns. It returns the store
// to go on with, or nil and the error that fails the shard.
func (s *Replica) fork(lf **logFork, dir string, rec runtime.Recorder, store runtime.Store, forker runtime.Forker, from pc.ShardID) (runtime.Store, error) {
	var spec = s.Spec()
	var parent = shardSpec(s.host.KeySpace, from)
	if parent == nil {
		return store, fmt.Errorf("shard %s: %w: shard %s (label %s) does not exist", spec.Id, runtime.ErrParentNotSplit, from, runtime.LabelSplitFrom)
	}
	var log = parent.RecoveryLog()
	if log == "" {
		return store, fmt.Errorf("shard %s: shard %s to fork from has no recovery log", spec.Id, from)
	}
	// Through the log's write head as it is now, not chasing the head while
	// the parent writes on: what a fork needs was written by the parent's
	// split, committed before (or the parent has not split yet, and the
	// fork plays on later).
	head, err := source.WriteHead(s.ctx, s.host.Journals, log)
	if err != nil {
		return store, fmt.Errorf("shard %s: recovery log of shard %s to fork from: %w", spec.Id, from, err)
	}
	var started = time.Now()
	if *lf != nil && (*lf).log == log && head > (*lf).head {
		var prev = *lf
		if err = prev.player.PlayOn(s.ctx, head); err == nil {
			prev.head = head
		} else {
			// The copy may have been changed by its read (as RocksDB writes
			// its info log): it's played anew.
			slog.Warn("playing on the recovery log of the shard to fork from failed: playing it anew", "shard", spec.Id, "from", from, "err", err)
			prev.close(spec.Id)
			*lf = nil
		}
	} else if *lf != nil && ((*lf).log != log || head < (*lf).head) {
		(*lf).close(spec.Id)
		*lf = nil
	}
	if *lf == nil {
		var all, err = recoverylog.FetchHints(s.ctx, s.host.Etcd, parent.HintPrimaryKey(), int(parent.HintBackups)+1)
		if err != nil {
			return store, fmt.Errorf("shard %s: hints of shard %s to fork from: %w", spec.Id, from, err)
		}
		if err = os.RemoveAll(dir); err == nil {
			err = os.MkdirAll(dir, 0o750)
		}
		if err != nil {
			return store, fmt.Errorf("shard %s: directory to fork in: %w", spec.Id, err)
		}
		var player = recoverylog.NewPlayer(s.host.Journals, log, dir, s.author())
		player.DoNotProxy, player.FileRoot = s.host.DirectFragmentReads, s.host.FileRoot
		if err = player.PlayTo(s.ctx, all[0], head); err != nil {
			return store, fmt.Errorf("shard %s: playing the recovery log of shard %s to fork from: %w", spec.Id, from, err)
		}
		*lf = &logFork{dir: dir, log: log, player: player, head: head}
	}
	var played = time.Now()
	var linker, canLink = s.host.App.(runtime.LinkForker)
	var recorder, recorded = rec.(*recoverylog.Recorder)
	if canLink && recorded && !s.host.ForkCopiesRows {
		if err = linker.CheckPlayed(s, (*lf).dir); errors.Is(err, runtime.ErrNotLinkable) {
			slog.Warn("the shard can't fork from links of its parent's files: it copies the rows it owns", "shard", spec.Id,
				"from", from, "err", err)
		} else if err != nil {
			return store, err
		} else if store, err = s.adoptPlayed(*lf, recorder, store, linker); err != nil {
			return store, err
		} else {
			slog.Info("shard forked", "shard", spec.Id, "from", from, "log", log,
				"bytesRead", (*lf).player.BytesRead(), "took", time.Since(started),
				"played", played.Sub(started), "adopted", time.Since(played))
			return store, nil
		}
	}
	if err = forker.Fork(s, store, dir); err != nil {
		return store, err
	}
	slog.Info("shard forked", "shard", spec.Id, "from", from, "log", log,
		"bytesRead", (*lf).player.BytesRead(), "took", time.Since(started),
		"played", played.Sub(started), "copied", time.Since(played))
	return store, nil
}

// adoptPlayed builds the shard's first state from lf, the copy of its
// parent's files played from the parent's recovery log, split: it destroys
// store, links the copy's files into the shard's directory, which rec
// adopts from the parent's log (their bytes stay there), opens the store
// on them, and forks it (runtime.LinkForker's ForkLinked). It returns the
// store, or nil and the error that fails the shard.
func (s *Replica) adoptPlayed(lf *logFork, rec *recoverylog.Recorder, store runtime.Store, linker runtime.LinkForker) (runtime.Store, error) {
	var spec = s.Spec()
	var hints, err = lf.player.Hints()
	if err != nil {
		return store, err
	}
	store.Destroy()
	if err = rec.RemoveAll(); err != nil {
		return nil, fmt.Errorf("shard %s: %w", spec.Id, err)
	}
	var local = func(dir, name string) string { return filepath.Join(dir, filepath.FromSlash(name)) }
	for _, ln := range hints.LiveNodes {
		var first = local(rec.Dir(), ln.Links[0])
		if err = os.MkdirAll(filepath.Dir(first), 0o750); err == nil {
			err = os.Link(local(lf.dir, ln.Links[0]), first)
		}
		if err == nil {
			err = rec.Adopt(first, &recoverylog.Source{Log: hints.Log, Node: ln})
		}
		for _, l := range ln.Links[1:] {
			if err == nil {
				err = os.MkdirAll(filepath.Dir(local(rec.Dir(), l)), 0o750)
			}
			if err == nil {
				err = os.Link(first, local(rec.Dir(), l))
			}
			if err == nil {
				err = rec.Link(first, local(rec.Dir(), l))
			}
		}
		if err != nil {
			return nil, fmt.Errorf("shard %s: adopting file %s of shard %s's recovery log: %w", spec.Id, ln.Links[0], hints.Log, err)
		}
	}
	for name, content := range hints.Properties {
		if err = os.MkdirAll(filepath.Dir(local(rec.Dir(), name)), 0o750); err == nil {
			err = os.WriteFile(local(rec.Dir(), name), content, 0o644)
		}
		if err == nil {
			err = rec.SetProperty(local(rec.Dir(), name), content)
		}
		if err != nil {
			return nil, fmt.Errorf("shard %s: copying property %s of shard %s's recovery log: %w", spec.Id, name, hints.Log, err)
		}
	}
	if store, err = s.host.App.NewStore(s, rec); err != nil {
		return nil, fmt.Errorf("shard %s: opening its store on the files adopted from its parent: %w", spec.Id, err)
	} else if ok, err := linker.ForkLinked(s, store); err != nil {
		return store, err
	} else if !ok {
		return store, fmt.Errorf("shard %s: its store, opened on the files of its parent, does not hold its parent's state", spec.Id)
	}
	return store, nil
}

// AwaitRevision waits until the member's KeySpace, and so the shard's spec,
// is as of revision hdr.Revision of etcd cluster hdr.ClusterId, or later
// (a runtime.RevisionAwaiter). It fails at once if the KeySpace is read from
// another cluster.
func (s *Replica) AwaitRevision(ctx context.Context, hdr pb.Header_Etcd) error {
	var ks = s.host.KeySpace
	ks.Mu.RLock()
	defer ks.Mu.RUnlock()
	if ks.Header.ClusterId != hdr.ClusterId {
		return fmt.Errorf("shard %s: its spec is read from etcd cluster %x, not %x", s.Spec().Id, ks.Header.ClusterId, hdr.ClusterId)
	}
	return ks.WaitForRevision(ctx, hdr.Revision)
}

// shardSpec returns the spec of shard id in ks, or nil if there is none.
func shardSpec(ks *keyspace.KeySpace, id pc.ShardID) *pc.ShardSpec {
	ks.Mu.RLock()
	defer ks.Mu.RUnlock()
	if i, ok := ks.KeyValues.Search(allocator.ItemKey(ks, id.String())); ok {
		return ks.KeyValues[i].Decoded.(allocator.Item).ItemValue.(*pc.ShardSpec)
	}
	return nil
}

// inheritedSources returns the sources a shard made by a rescale reads as
// inherited from the shards it was split from (its state records them), with
// the write heads they have now. It reads them before its own journals,
// through these heads: a key's messages written before producers switched
// to its new partition are applied before those written after. While its
// rescale goes on, the heads are taken no sooner than the spec's
// runtime.LabelSplitSettle after the primary began (at began), which was
// after the rescale's journals were created: producers have switched by
// then.
func (s *Replica) inheritedSources(ctx context.Context, spec *pc.ShardSpec, store runtime.Store, began time.Time) ([]pc.ShardSpec_Source, map[pb.Journal]pb.Offset, error) {
	var forker, ok = s.host.App.(runtime.Forker)
	if !ok {
		return nil, nil, nil
	}
	var journals, err = forker.Inherited(s, store)
	if err != nil {
		return nil, nil, err
	}
	if len(journals) != 0 && spec.LabelSet.ValueOf(runtime.LabelSplitFrom) != "" {
		var settle, err = runtime.SplitSettleOf(spec)
		if err != nil {
			return nil, nil, err
		}
		if wait := time.Until(began.Add(settle)); wait > 0 {
			slog.Info("shard waits for producers to switch to the rescale's journals before it reads its inherited journals' heads",
				"shard", spec.Id, "wait", wait)
			select {
			case <-ctx.Done():
				return nil, nil, ctx.Err()
			case <-time.After(wait):
			}
		}
	}
	var sources []pc.ShardSpec_Source
	var heads = make(map[pb.Journal]pb.Offset)
	for _, j := range journals {
		if slices.ContainsFunc(spec.Sources, func(src pc.ShardSpec_Source) bool { return src.Journal == j }) {
			continue // Listed by its spec too.
		}
		var head, err = source.WriteHead(ctx, s.host.Journals, j)
		if err != nil {
			return nil, nil, fmt.Errorf("shard %s: inherited journal: %w", spec.Id, err)
		}
		sources, heads[j] = append(sources, pc.ShardSpec_Source{Journal: j}), head
	}
	return sources, heads, nil
}

var _ runtime.RevisionAwaiter = (*Replica)(nil)
