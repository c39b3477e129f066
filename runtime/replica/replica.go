// Package replica runs a member's replica of a shard: a hot standby
// following the shard's recovery log, or, once promoted, the primary that
// recovers the store from the log, fences it, and runs the shard's
// transactions over its sources. A shard made by a rescale forks its first
// state from the recovery log of the shard it's split from.
//
// The member (runtime/service) starts, updates and cancels replicas as its
// assignments change; a replica needs of it only what Host holds.
package replica

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gazconsumer/gazconsumer/recoverylog"
	"github.com/gazconsumer/gazconsumer/runtime"
	"github.com/gazconsumer/gazconsumer/runtime/sequence"
	"github.com/gazconsumer/gazconsumer/runtime/shardmetrics"
	"github.com/gazconsumer/gazconsumer/runtime/source"
	"github.com/gazconsumer/gazconsumer/runtime/txn"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.gazette.dev/core/allocator"
	"go.gazette.dev/core/broker/client"
	pb "go.gazette.dev/core/broker/protocol"
	pc "go.gazette.dev/core/consumer/protocol"
	"go.gazette.dev/core/keyspace"
	"go.gazette.dev/core/message"
)

// DefaultHintsGrowth is Config.HintsGrowth's default: a recovery reads at
// most about a fifth of the shard's live state more than one from hints of
// the moment it begins.
const DefaultHintsGrowth = 0.2

// DefaultMinHintsGrowth is Config.MinHintsGrowth's default: the least
// excess of what a recovery from a primary's stored hints reads, over one
// from hints of now, that has it store them before Config.HintsInterval
// ends. It bounds how often a shard of a small state writes its hints to
// etcd.
const DefaultMinHintsGrowth = 16 << 20

const (
	// minHintsGap is the least time between a primary's stores of its
	// hints for its log's growth, and hintsGrowthPoll how often it looks.
	minHintsGap     = time.Second
	hintsGrowthPoll = 250 * time.Millisecond

	defaultReadChannelSize = 1 << 13 // 8192, as Gazette's consumers.
	defaultRingBufferSize  = 8192
	// maxStatusErrorLen bounds the error text kept in etcd.
	maxStatusErrorLen = 4096
)

// Config configures the replicas of a member.
type Config struct {
	// StateDir holds the local directories of the shards' stores.
	StateDir string
	// HintsInterval is how often a primary stores recovery-log hints while
	// it records (it also stores them as it starts).
	HintsInterval time.Duration
	// HintsGrowth has a primary store hints before HintsInterval ends once
	// a recovery from the last ones would read more than one from hints of
	// now by this fraction of its live state, and by more than
	// MinHintsGrowth (as its log grows past them, and as the files they
	// name are replaced by smaller ones), at most once a second: a recovery
	// then reads at most about that fraction of the live state more than it
	// must, however fast the log grows. Zero means DefaultHintsGrowth; a
	// negative fraction stores hints only every HintsInterval. Zero
	// MinHintsGrowth means DefaultMinHintsGrowth.
	HintsGrowth    float64
	MinHintsGrowth int64
	// DirectFragmentReads has recovery logs played from persisted
	// fragments read straight from their stores (recoverylog.Player's
	// DoNotProxy), rather than through the brokers, unless a playback
	// finds the process can't open the URLs brokers sign (file:// stores
	// need runconsumer.Flags.FileRoot). Reads that may not be proxied must
	// reach brokers of their journals: the journal client must route.
	DirectFragmentReads bool
	// FileRoot is the local path which roots the brokers' file:// fragment
	// stores (runconsumer.Flags.FileRoot), if the member has it: direct
	// playbacks map those stores' fragment files rather than read them
	// through their URLs (recoverylog.Player's FileRoot).
	FileRoot string
	// ForkFromLog has a new shard of a rescale always play its parent's
	// recovery log to fork from it. Otherwise, when the parent's primary
	// runs in the same member, the new shard links the parent's files, or
	// reads the parent's committed state from its store (ForkCopiesRows):
	// no playback, and the parent's commits go on meanwhile.
	ForkFromLog bool
	// ForkCopiesRows has a new shard of a rescale whose parent's primary
	// runs in the same member copy the rows it owns from the parent's
	// store. Otherwise, if the application is a runtime.LinkForker, it
	// links the parent's files, and hides what it does not own until it
	// drops it (its recovery log adopts the parent's files: their bytes
	// stay in the parent's log).
	ForkCopiesRows bool
	// ForkYield, if positive, has such a parent's readers hold their reads
	// while the new shard copies rows from its store, at most ForkYield, leaving
	// it the processors they'd take: the new shard serves sooner, and the
	// parent consumes nothing meanwhile. If not, the parent goes on
	// consuming as the new shard forks.
	ForkYield time.Duration
}

// Host is what a replica needs of the member that runs it.
type Host struct {
	// App is the application whose shard the replica runs.
	App runtime.Application
	// Etcd holds the replica's assignment, whose status it writes, and the
	// shards' recovery-log hints.
	Etcd *clientv3.Client
	// Journals is a client of the Gazette brokers.
	Journals pb.RoutedJournalClient
	// KeySpace of the consumer group, as the member observes it: its lock
	// guards the replica's assignment, and it holds the spec of a shard a
	// replica forks from.
	KeySpace *keyspace.KeySpace
	// Member is the ID of the member, for logs.
	Member string
	// Local returns the member's replica of shard id, if it runs one (nil
	// if Local is).
	Local func(id pc.ShardID) *Replica
	// Config of the member's replicas.
	Config
}

// Replica is a local replica of a ShardSpec: a hot standby following the
// recovery log, or the primary processing the shard's sources.
type Replica struct {
	host   *Host
	ctx    context.Context
	cancel context.CancelFunc
	ajc    *client.AppendService
	// prior is the replica of the shard this one replaces, if any: this
	// one starts once it has stopped (they may share a directory).
	prior *Replica
	done  chan struct{} // Closed once Serve returns.

	mu         sync.Mutex
	spec       *pc.ShardSpec
	asn        keyspace.KeyValue
	serving    runtime.CommittedReader // The store, while the primary runs transactions on it.
	servingCh  chan struct{}           // Closed once serving is first set.
	promotedCh chan struct{}           // Closed once the replica is the primary.
	promoted   bool
	// nudge receives as the primary starts, and when the spec's rescale
	// label changes: the primary then begins a transaction even if it has
	// nothing to read, in which its application acts on its spec (see
	// runtime.LabelSplitTo).
	nudge chan struct{}
	// hintsNow asks for hints to be stored now, not at the next tick.
	hintsNow chan struct{}
	// gate holds the primary's readers while it yields its processors to
	// a rescale: split holds it from the spec's asking for a split until
	// the split starts its commit, and new shards forking from its store
	// hold it.
	gate  readGate
	split splitHold

	// fqn is the shard's fully qualified name, the etcd key of its spec:
	// the label of Gazette's metrics of its transactions.
	fqn string
	// preparedAt is when the last transaction committed by the primary
	// began its commit, for the metric of the time between transactions.
	preparedAt time.Time
	// rescale is where the primary's state stood in a rescale as its
	// gauges last reported (the zero value: no gauge).
	rescale runtime.RescaleState

	// writer identifies this replica's writes to the recovery log. It's
	// fixed when the replica starts: a promotion moves its assignment to a
	// new key, but the replica that played the log is the one to write it.
	writer recoverylog.Author

	progress struct {
		sync.Mutex
		readThrough pb.Offsets
		publishAt   pb.Offsets
		changed     chan struct{} // Closed and replaced on each change.
	}
}

var _ runtime.Shard = (*Replica)(nil)

// New returns a replica of the shard of spec, assigned to the member of
// host by asn, which replaces prior (nil if it replaces none): Serve runs it
// once prior has stopped.
func New(host *Host, spec *pc.ShardSpec, asn keyspace.KeyValue, prior *Replica) *Replica {
	var ctx, cancel = context.WithCancel(context.Background())
	var s = &Replica{
		host:       host,
		ctx:        ctx,
		cancel:     cancel,
		ajc:        client.NewAppendService(ctx, host.Journals),
		prior:      prior,
		spec:       spec,
		asn:        asn,
		promotedCh: make(chan struct{}),
		servingCh:  make(chan struct{}),
		done:       make(chan struct{}),
		nudge:      make(chan struct{}, 1),
		hintsNow:   make(chan struct{}, 1),
		fqn:        allocator.ItemKey(host.KeySpace, spec.Id.String()),
	}
	s.writer = authorOf(asn)
	s.progress.readThrough = make(pb.Offsets)
	s.progress.publishAt = make(pb.Offsets)
	s.progress.changed = make(chan struct{})
	return s
}

// Context is cancelled when this process loses the shard.
func (s *Replica) Context() context.Context { return s.ctx }

// Spec of the shard, as currently held in etcd.
func (s *Replica) Spec() *pc.ShardSpec {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.spec
}

// Assignment of the shard to this member.
func (s *Replica) Assignment() keyspace.KeyValue {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.asn
}

// JournalClient through which the shard's appends flow.
func (s *Replica) JournalClient() client.AsyncJournalClient { return s.ajc }

// servingStore returns the store of the primary, if it is running
// transactions and its store reads committed state.
func (s *Replica) servingStore() runtime.CommittedReader {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.serving
}

// setServing sets the store that servingStore returns.
func (s *Replica) setServing(store runtime.CommittedReader) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if store != nil && s.serving == nil {
		select {
		case <-s.servingCh:
		default:
			close(s.servingCh)
		}
	}
	s.serving = store
}

// AwaitServing waits until the replica serves committed reads as the
// shard's primary, and returns its store: nil if the replica stopped, or
// stops serving, first, or ctx ended first.
func (s *Replica) AwaitServing(ctx context.Context) runtime.CommittedReader {
	select {
	case <-s.servingCh:
	case <-s.done:
	case <-ctx.Done():
		return nil
	}
	return s.servingStore()
}

// CreateRevision of the replica's assignment: an assignment removed and
// created anew has another.
func (s *Replica) CreateRevision() int64 { return s.Assignment().Raw.CreateRevision }

// Slot of the replica's assignment: 0 for the primary.
func (s *Replica) Slot() int { return s.Assignment().Decoded.(allocator.Assignment).Slot }

// Cancel stops the replica: the member no longer runs it. Serve returns
// once it has torn down.
func (s *Replica) Cancel() { s.cancel() }

// Progress returns copies of the offsets the primary has read through and
// published at, and the channel closed at their next change.
func (s *Replica) Progress() (readThrough, publishAt pb.Offsets, changed <-chan struct{}) {
	s.progress.Lock()
	defer s.progress.Unlock()
	return s.progress.readThrough.Copy(), s.progress.publishAt.Copy(), s.progress.changed
}

// Update records the current spec and assignment; it's called under the
// KeySpace lock.
func (s *Replica) Update(spec *pc.ShardSpec, asn keyspace.KeyValue) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if to := spec.LabelSet.ValueOf(runtime.LabelSplitTo); s.spec.LabelSet.ValueOf(runtime.LabelSplitTo) != to {
		if to != "" && s.promoted {
			s.split.take(&s.gate, spec.Id)
			// A new shard in this member links the store's files once the
			// split commits, flushing its memtables: what they held before
			// the ask is flushed by then.
			if f, ok := s.serving.(runtime.Flusher); ok {
				f.FlushAhead()
			}
		}
		s.nudgeTxn()
	}
	s.spec, s.asn = spec, asn
	if asn.Decoded.(allocator.Assignment).Slot == 0 && !s.promoted {
		s.promoted = true
		close(s.promotedCh)
	}
}

// RestartReason returns why a replica running spec must start over to run
// next, or "" if it need not: the transaction bounds and the labels that
// set its policies apply to a running replica, but its sources, recovery
// log and hints are fixed when it starts.
func RestartReason(spec, next *pc.ShardSpec) string {
	var changed []string
	if !slices.Equal(spec.Sources, next.Sources) {
		changed = append(changed, "sources")
	}
	if spec.RecoveryLogPrefix != next.RecoveryLogPrefix {
		changed = append(changed, "recovery_log_prefix")
	}
	if spec.HintPrefix != next.HintPrefix || spec.HintBackups != next.HintBackups {
		changed = append(changed, "hints")
	}
	if spec.RingBufferSize != next.RingBufferSize || spec.ReadChannelSize != next.ReadChannelSize {
		changed = append(changed, "buffer sizes")
	}
	return strings.Join(changed, ", ")
}

// nudgeTxn asks the primary, if it runs, to begin a transaction.
func (s *Replica) nudgeTxn() {
	select {
	case s.nudge <- struct{}{}:
	default: // One is pending.
	}
}

// author identifies this replica's writes to the recovery log.
func (s *Replica) author() recoverylog.Author { return s.writer }

// authorOf derives a recovery-log author from an assignment: it is distinct
// for each assignment of the shard to a member.
func authorOf(asn keyspace.KeyValue) recoverylog.Author {
	var a = crc32.ChecksumIEEE(fmt.Appendf(nil, "%s@%d", asn.Raw.Key, asn.Raw.CreateRevision))
	if a == 0 {
		a = 1
	}
	return recoverylog.Author(a)
}

// Serve runs the replica until its context is cancelled or it fails. A
// failure is recorded in the assignment's status, which `gazctl shards list`
// shows.
func (s *Replica) Serve() {
	defer close(s.done)
	if s.prior != nil {
		<-s.prior.done
		s.prior = nil
	}
	var id = s.Spec().Id
	var dir = filepath.Join(s.host.StateDir, strings.ReplaceAll(id.String(), "/", "_")+fmt.Sprintf("-%d", s.CreateRevision()))
	slog.Debug("shard's replica starts", "shard", id, "member", s.host.Member, "dir", dir)
	shardmetrics.Init(id)
	defer func() {
		s.cancel()
		shardmetrics.ForgetRecovery(id)
		shardmetrics.ForgetReads(id, s.fqn)
		shardmetrics.ForgetRescale(id)
		if err := os.RemoveAll(dir); err != nil {
			slog.Warn("removing shard directory", "shard", id, "dir", dir, "err", err)
		}
	}()

	// The shard's goroutines, and those they start, carry its id as a
	// profiler label: a member's CPU profile breaks down by shard
	// (go tool pprof -tagfocus shard=ID, or -tags).
	var err error
	pprof.Do(s.ctx, pprof.Labels("shard", id.String()), func(context.Context) { err = s.run(dir) })
	if err != nil && s.ctx.Err() == nil {
		slog.Error("shard failed", "shard", id, "member", s.host.Member, "err", err)
		shardmetrics.Failure(id, err)
		var msg = err.Error()
		if len(msg) > maxStatusErrorLen {
			msg = msg[:maxStatusErrorLen] + " ...[truncated]"
		}
		s.setStatus(pc.ReplicaStatus{Code: pc.ReplicaStatus_FAILED, Errors: []string{msg}})
	}
}

func (s *Replica) run(dir string) error {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return fmt.Errorf("shard %s: creating %s: %w", s.Spec().Id, dir, err)
	}
	var spec = s.Spec()
	var recLog = spec.RecoveryLog()
	var fsm *recoverylog.FSM

	if recLog == "" {
		// Without a recovery log there is nothing to follow: the replica is
		// ready to take over at once.
		s.setStatus(pc.ReplicaStatus{Code: pc.ReplicaStatus_STANDBY})
		select {
		case <-s.promotedCh:
		case <-s.ctx.Done():
			return s.ctx.Err()
		}
	} else {
		var err error
		if fsm, err = s.recover(dir, spec, recLog); err != nil {
			return err
		}
	}
	return s.servePrimary(dir, recLog, fsm)
}

// recover plays the recovery log into dir, following it as a hot standby
// until the replica is promoted, then finishes at the write head and fences
// the log so that this replica becomes its one writer.
func (s *Replica) recover(dir string, spec *pc.ShardSpec, recLog pb.Journal) (*recoverylog.FSM, error) {
	s.setStatus(pc.ReplicaStatus{Code: pc.ReplicaStatus_BACKFILL})

	var all, err = recoverylog.FetchHints(s.ctx, s.host.Etcd, spec.HintPrimaryKey(), int(spec.HintBackups)+1)
	if err != nil {
		return nil, fmt.Errorf("shard %s: %w", spec.Id, err)
	}
	var hints = all[0] // Nil plays the log from its start.
	slog.Debug("shard's replica plays its recovery log", "shard", spec.Id, "log", recLog, "hinted", hints != nil)

	var progress = shardmetrics.NewRecoveryProgress(spec.Id)
	var player = recoverylog.NewPlayer(progress.JournalClient(s.host.Journals, recLog), recLog, dir, s.author())
	player.DoNotProxy, player.FileRoot = s.host.DirectFragmentReads, s.host.FileRoot
	var done = make(chan struct{})
	var fsm *recoverylog.FSM
	go func() {
		defer close(done)
		fsm, err = player.Play(s.ctx, hints)
	}()
	go progress.Follow(player, done)

	select {
	case <-player.Tailing():
		s.setStatus(pc.ReplicaStatus{Code: pc.ReplicaStatus_STANDBY})
	case <-done:
	}
	select {
	case <-s.promotedCh:
		player.FinishAtWriteHead()
	case <-done:
	}
	<-done
	if err != nil {
		return nil, fmt.Errorf("shard %s: playing recovery log: %w", spec.Id, err)
	}
	shardmetrics.ForgetRecovery(spec.Id) // Recovered: the replica is the primary.
	return fsm, nil
}

// servePrimary opens the store, restores its checkpoint and runs
// transactions from it until the shard is lost or fails.
func (s *Replica) servePrimary(dir string, recLog pb.Journal, fsm *recoverylog.FSM) error {
	var began = time.Now()
	var spec = s.Spec()
	if _, err := source.PolicyOf(spec); err != nil {
		return err
	}
	maxSize, err := source.MaxMessageSizeOf(spec)
	if err != nil {
		return err
	}
	if _, err = runtime.MaxTxnOf(spec); err != nil {
		return err
	}
	var rec runtime.Recorder = localDir(dir)
	var recorder *recoverylog.Recorder
	if fsm != nil {
		if recorder, err = recoverylog.NewRecorder(recLog, fsm, s.author(), dir, s.ajc); err != nil {
			return fmt.Errorf("shard %s: %w", spec.Id, err)
		}
		rec = recorder
	}

	if _, err = s.linkIfNew(rec); err != nil {
		return err
	}
	store, err := s.host.App.NewStore(s, rec)
	if err != nil {
		return fmt.Errorf("shard %s: opening store: %w", spec.Id, err)
	}
	defer func() {
		if store != nil {
			store.Destroy()
		}
	}()
	if store, err = s.forkIfNew(dir, rec, store); err != nil {
		return err
	}

	cp, err := store.RestoreCheckpoint(s)
	if err != nil {
		return fmt.Errorf("shard %s: restoring checkpoint: %w", spec.Id, err)
	}
	s.progressFrom(spec, cp)
	if cr, ok := store.(runtime.CommittedReader); ok {
		// Queries read it from now until it's destroyed (deferred above:
		// this runs first).
		s.setServing(cr)
		defer s.setServing(nil)
	}
	s.setStatus(pc.ReplicaStatus{Code: pc.ReplicaStatus_PRIMARY})
	slog.Info("shard is primary", "shard", spec.Id, "member", s.host.Member, "sources", len(cp.Sources))

	if recorder != nil {
		go s.storeHints(spec, recorder)
	}

	var ringSize = int(spec.RingBufferSize)
	if ringSize == 0 {
		ringSize = defaultRingBufferSize
	}
	var chanSize = int(spec.ReadChannelSize)
	if chanSize == 0 {
		chanSize = defaultReadChannelSize
	}
	var reads = txn.NewQueue(chanSize)
	var readers sync.WaitGroup
	var readCtx, stopReading = context.WithCancel(s.ctx)
	defer func() { stopReading(); readers.Wait() }()
	inherited, heads, err := s.inheritedSources(readCtx, spec, store, began)
	if err != nil {
		return err
	}
	s.startReading(readCtx, &readers, spec, slices.Concat(inherited, spec.Sources), maxSize, cp, heads, reads)
	// A first transaction, even with nothing to read: the application acts
	// on what the spec asks (a rescale may wait for this shard to split,
	// or to drop the rows it handed off).
	s.nudgeTxn()
	readers.Add(1)
	go func() {
		defer readers.Done()
		for {
			select {
			case <-s.nudge:
				if reads.Put(readCtx, txn.Read{Nudge: true}) != nil {
					return
				}
			case <-readCtx.Done():
				return
			}
		}
	}()

	var pipeline = &txn.Pipeline{
		Shard:     s,
		Store:     store,
		App:       s.host.App,
		Publisher: message.NewPublisher(s.ajc, nil),
		Sequencer: sequence.New(pc.FlattenReadThrough(cp), pc.FlattenProducerStates(cp), ringSize),
		Replay: func(journal pb.Journal, begin, end pb.Offset) message.Iterator {
			return source.NewAppIter(client.NewRetryReader(s.ctx, s.ajc, pb.ReadRequest{
				Journal: journal, Offset: begin, EndOffset: end, Block: true,
			}), s.host.App, maxSize)
		},
		Pending: func() client.OpFutures { return s.ajc.PendingExcept(recLog) },
		Clock:   wallClock{},
		// The transaction bounds of the spec as it is when each
		// transaction begins: a change applies from the next one.
		Limits: func() (txn.Limits, error) {
			var spec = s.Spec()
			var maxTxn, err = runtime.MaxTxnOf(spec)
			return txn.Limits{MinDuration: spec.MinTxnDuration, MaxDuration: spec.MaxTxnDuration,
				WaitForAck: !spec.DisableWaitForAck, MaxTxn: maxTxn}, err
		},
		ProducerPruneHorizon: 24 * time.Hour,
		Committed:            func(st txn.Stats) { s.committed(st, store) },
		Finalized:            func(st txn.Stats) { s.split.finalized(st.Began.Add(st.Consume)) },
		Progress:             s.readIdle,
		Hurry:                s.split.taken,
		Hurried:              s.split.hurried,
		Skip:                 s.skip,
	}
	err = pipeline.Run(s.ctx, cp, reads)
	if errors.Is(err, context.Canceled) && s.ctx.Err() != nil {
		return s.ctx.Err()
	} else if err != nil {
		return fmt.Errorf("shard %s: %w", spec.Id, err)
	}
	return nil
}

// startReading reads each source journal from the checkpoint's offset (at
// least the source's MinOffset) into reads, read-uncommitted. A message that
// fails to decode ends reading with its error, or is passed on to be
// skipped, as the decode policy of the shard's current spec says.
//
// sources are the spec's and those the shard inherited (a shard made by a
// rescale reads those of the shards it's split from): the inherited are read
// first, and the others only once those were read through their heads in
// inherited.
func (s *Replica) startReading(ctx context.Context, wg *sync.WaitGroup, spec *pc.ShardSpec, sources []pc.ShardSpec_Source, maxSize int, cp pc.Checkpoint,
	inherited map[pb.Journal]pb.Offset, reads *txn.Queue) {

	var drained = make(chan struct{}) // Closed once inherited journals are read through their heads.
	var toDrain sync.WaitGroup
	for _, src := range sources {
		var offset = max(cp.Sources[src.Journal].ReadThrough, src.MinOffset)
		if head, ok := inherited[src.Journal]; ok && offset < head {
			toDrain.Add(1)
		}
	}
	go func() { toDrain.Wait(); close(drained) }()

	for _, src := range sources {
		var offset = max(cp.Sources[src.Journal].ReadThrough, src.MinOffset)
		var head, isInherited = inherited[src.Journal]
		var draining = isInherited && offset < head
		var rr = client.NewRetryReader(ctx, s.ajc, pb.ReadRequest{Journal: src.Journal, Offset: offset, Block: true})
		var it = source.NewAppIter(rr, s.host.App, maxSize)
		var lag = shardmetrics.NewLagReporter(spec.Id, src.Journal)

		wg.Add(1)
		go func() {
			defer wg.Done()
			if !isInherited {
				select {
				case <-drained:
				case <-ctx.Done():
					return
				}
			}
			for {
				var env, undecodable, err = it.Read()
				if draining && (err != nil || env.End >= head) {
					draining = false
					toDrain.Done()
				}
				if err == nil {
					// The reader's last response tells the journal's write head.
					lag.Report(max(0, rr.Reader.Response.WriteHead-env.End), rr.Reader.Response.Offset)
				} else {
					if ctx.Err() != nil {
						return
					}
					err = fmt.Errorf("reading journal %s (next offset %d): %w", src.Journal, rr.Offset(), err)
				}
				// The spec's policy is read only for a message that failed to
				// decode (it may change with the spec; looking its labels up
				// for every message cost a tenth of the reading).
				var r = source.Policy{}.ToRead(env, nil, err)
				if undecodable != nil && err == nil {
					if policy, perr := source.PolicyOf(s.Spec()); perr != nil {
						r = txn.Read{Err: perr}
					} else {
						r = policy.ToRead(env, undecodable, nil)
					}
				}
				if err == nil {
					r.Lag = max(0, rr.Reader.Response.WriteHead-env.End)
				}
				if s.gate.wait(ctx) != nil || reads.Put(ctx, r) != nil {
					return // Cancelled.
				}
				if r.Err != nil {
					return
				}
			}
		}()
	}
}

// progressFrom starts the shard's read progress at the checkpoint cp that
// its store restored: Stat reports a recovered shard caught up with what it
// had read, before any new transaction commits.
func (s *Replica) progressFrom(spec *pc.ShardSpec, cp pc.Checkpoint) {
	s.progress.Lock()
	for _, src := range spec.Sources {
		s.progress.readThrough[src.Journal] = cp.Sources[src.Journal].ReadThrough
	}
	close(s.progress.changed)
	s.progress.changed = make(chan struct{})
	s.progress.Unlock()
}

// readIdle records the progress of a read that began no transaction.
func (s *Replica) readIdle(journal pb.Journal, offset pb.Offset) {
	s.progress.Lock()
	s.progress.readThrough[journal] = max(s.progress.readThrough[journal], offset)
	close(s.progress.changed)
	s.progress.changed = make(chan struct{})
	s.progress.Unlock()
}

// skip records an undecodable message, or one whose handler failed under a
// failure policy recording dead letters, into the dead-letter journal that
// the shard's current spec names. If the spec no longer asks for skipping
// an undecodable message, the message fails the shard.
func (s *Replica) skip(env message.Envelope, cause error, pub *message.Publisher) error {
	return source.Skip(s.Spec(), env, cause, pub)
}

// committed records the progress of a committed transaction of store.
func (s *Replica) committed(st txn.Stats, store runtime.Store) {
	if s.Spec().LabelSet.ValueOf(runtime.LabelSplitTo) != "" {
		slog.Debug("splitting primary committed a transaction", "shard", s.Spec().Id, "began", st.Began,
			"consume", st.Consume, "hurried", st.Hurried, "stalled", st.Stalled, "fire", st.Fire, "fired", st.Fired,
			"finalize", st.Finalize, "commit", st.Commit, "ack", st.Ack, "messages", st.Messages, "bytes", st.Bytes)
		// New shards fork from this one's recovery log, from its hints:
		// fresh hints spare them reading its log since the last ones.
		select {
		case s.hintsNow <- struct{}{}:
		default:
		}
	}
	var notRunning time.Duration
	if !s.preparedAt.IsZero() {
		notRunning = max(0, st.Began.Sub(s.preparedAt))
	}
	s.preparedAt = st.Began.Add(st.Consume + st.Finalize)
	shardmetrics.Committed(s.Spec().Id, s.fqn, notRunning, st)
	if rr, ok := s.host.App.(runtime.RescaleReporter); ok {
		// The gauges change with the state's phase, not with each commit.
		if rs, ok := rr.RescaleState(s, store); ok && rs != s.rescale {
			shardmetrics.Rescale(s.Spec().Id, rs)
			s.rescale = rs
		}
	}
	s.progress.Lock()
	for j, src := range st.Checkpoint.Sources {
		s.progress.readThrough[j] = src.ReadThrough
	}
	for j, end := range st.PublishAt {
		s.progress.publishAt[j] = end
	}
	close(s.progress.changed)
	s.progress.changed = make(chan struct{})
	s.progress.Unlock()
}

// storeHints stores hints of the recovery log, so that a replica
// recovering the shard reads only the log segments still live, and then
// the log past the hints: once as the primary starts, every HintsInterval
// unless nothing was recorded since, and sooner as a recovery from them
// comes to read more than the live state (hintsPolicy).
func (s *Replica) storeHints(spec *pc.ShardSpec, rec *recoverylog.Recorder) {
	var interval = time.NewTicker(s.host.HintsInterval)
	defer interval.Stop()
	var poll = time.NewTicker(hintsGrowthPoll)
	defer poll.Stop()

	var policy = newHintsPolicy(s.host.Config)
	for now := true; ; now = false {
		if !now {
			select {
			case <-s.ctx.Done():
				return
			case <-interval.C:
				if policy.current(rec.Stats()) {
					continue // An idle shard's hints stand.
				}
			case <-s.hintsNow:
			case <-poll.C:
				if !policy.due(time.Now(), rec.Stats) {
					continue
				}
			}
		}
		policy.tried(time.Now())
		var h, err = rec.Hints(s.ctx)
		if err == nil {
			err = recoverylog.StoreHints(s.ctx, s.host.Etcd, spec.HintPrimaryKey(), h, int(spec.HintBackups)+1)
		}
		if err != nil {
			if s.ctx.Err() == nil {
				slog.Warn("storing recovery-log hints (will retry)", "shard", spec.Id, "err", err)
			}
			continue
		}
		var st = recoverylog.StatsOf(h)
		slog.Debug("stored recovery-log hints", "shard", spec.Id, "end", h.NextOffset, "liveBytes", st.LiveBytes,
			"hintedBytes", st.HintedBytes, "readBefore", policy.read(h.NextOffset))
		policy.stored(h.NextOffset, st.HintedBytes)
	}
}

// hintsPolicy has a primary store its hints before HintsInterval ends once
// a recovery from the last ones would read more than one from hints of now
// by a fraction of the live state (Config.HintsGrowth), and by
// MinHintsGrowth: as the log grows past them, and as the files they name
// are replaced by smaller ones (a flush of memtables whose write-ahead
// logs they name, a compaction). A player of the stored hints then reads at
// most about that fraction of the live state more than it must, however
// fast the log grows. It tries at most once in minHintsGap, which bounds
// the writes of a small state's hints to etcd.
type hintsPolicy struct {
	growth  float64 // Fraction of live bytes; negative: never.
	floor   int64
	end     int64 // Log offset at which the hints stored last end.
	hinted  int64 // Bytes of their segments.
	stores  int   // Hints stored.
	triedAt time.Time
}

func newHintsPolicy(c Config) hintsPolicy {
	var p = hintsPolicy{growth: c.HintsGrowth, floor: c.MinHintsGrowth}
	if p.growth == 0 {
		p.growth = DefaultHintsGrowth
	}
	if p.floor == 0 {
		p.floor = DefaultMinHintsGrowth
	}
	return p
}

// read is how many bytes a player of the hints stored last reads, the log
// reaching offset.
func (p *hintsPolicy) read(offset int64) int64 { return p.hinted + offset - p.end }

// due reports whether hints are due at now, hints of the log as it stands
// having the stats that stats returns (called only if they're needed).
func (p *hintsPolicy) due(at time.Time, stats func() recoverylog.Stats) bool {
	if p.growth < 0 || at.Sub(p.triedAt) < minHintsGap {
		return false
	}
	var now = stats()
	return p.read(now.End)-now.HintedBytes > max(int64(p.growth*float64(now.LiveBytes)), p.floor)
}

// current reports whether the hints stored last are those of the log as it
// stands, with stats now: nothing was recorded since.
func (p *hintsPolicy) current(now recoverylog.Stats) bool {
	return p.stores != 0 && now.End == p.end
}

// tried records that hints are built and stored at now.
func (p *hintsPolicy) tried(now time.Time) { p.triedAt = now }

// stored records the hints stored, which end at log offset end, and whose
// segments span hinted bytes of the log.
func (p *hintsPolicy) stored(end, hinted int64) { p.end, p.hinted, p.stores = end, hinted, p.stores+1 }

// setStatus writes the replica's status into its assignment, retrying until
// it succeeds or the replica is cancelled.
func (s *Replica) setStatus(status pc.ReplicaStatus) {
	for attempt := 0; s.ctx.Err() == nil; attempt++ {
		var err = s.trySetStatus(status)
		if err == nil {
			return
		}
		if attempt > 3 {
			slog.Warn("updating shard status (will retry)", "shard", s.Spec().Id, "err", err, "attempt", attempt)
		}
		select {
		case <-s.ctx.Done():
		case <-time.After(time.Duration(min(attempt+1, 20)) * 50 * time.Millisecond):
		}
	}
}

func (s *Replica) trySetStatus(status pc.ReplicaStatus) error {
	var ks = s.host.KeySpace
	ks.Mu.RLock()
	var asn = s.Assignment()
	ks.Mu.RUnlock()

	status.Reduce(asn.Decoded.(allocator.Assignment).AssignmentValue.(*pc.ReplicaStatus))
	var key = string(asn.Raw.Key)
	var resp, err = s.host.Etcd.Txn(s.ctx).
		If(clientv3.Compare(clientv3.ModRevision(key), "=", asn.Raw.ModRevision)).
		Then(clientv3.OpPut(key, status.MarshalString(), clientv3.WithIgnoreLease())).
		Commit()
	if err != nil {
		return err
	} else if !resp.Succeeded {
		// Our view of the assignment is stale: wait to observe a newer one.
		ks.Mu.RLock()
		defer ks.Mu.RUnlock()
		_ = ks.WaitForRevision(s.ctx, ks.Header.Revision+1)
		return fmt.Errorf("assignment %s changed", key)
	}
	ks.Mu.RLock()
	defer ks.Mu.RUnlock()
	return ks.WaitForRevision(s.ctx, resp.Header.Revision)
}

// localDir is the Recorder of a shard without a recovery log: its files
// live only in its local directory.
type localDir string

func (d localDir) Dir() string { return string(d) }

// wallClock is the real Clock of transactions.
type wallClock struct{}

func (wallClock) Now() time.Time { return time.Now() }
func (wallClock) Timer(d time.Duration) (<-chan time.Time, func()) {
	var t = time.NewTimer(d)
	return t.C, func() { t.Stop() }
}
