// Package txn runs a shard's pipelined consumer transactions: it sequences
// read-uncommitted envelopes into read-committed messages, hands them to the
// Application in transactions bounded by the shard's minimum and maximum
// durations, commits each transaction's checkpoint through the Store after
// the transaction's appends, and writes acknowledgements once it commits.
//
// A transaction begins with the first committed message to consume. It
// stays open at least MinDuration, and past it for as long as messages are
// ready, or a reader behind its journal's write head delivers them until
// the transaction has consumed as many bytes as the largest backlog it saw
// (or a message sequence started in it awaits its acknowledgement), up to
// MaxDuration, or until its writes reach MaxTxn (as the shard's labels
// runtime.LabelMaxTxnBytes and runtime.LabelMaxTxnWrites set it). It then finalizes and
// starts to commit. Its successor may begin consuming at once, but may not
// finalize until its predecessor's commit and acknowledgements are done; if
// its own MaxDuration (or MaxTxn) comes first, it stops reading (it stalls)
// until they are. A transaction that hurries (Pipeline.Hurry) finalizes
// without waiting for them: its commit, which the Store orders after its
// predecessor's, is then in flight beside it.
package txn

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	goruntime "runtime"
	"time"

	"github.com/gazconsumer/gazconsumer/runtime"
	"github.com/gazconsumer/gazconsumer/runtime/sequence"
	"go.gazette.dev/core/broker/client"
	pb "go.gazette.dev/core/broker/protocol"
	pc "go.gazette.dev/core/consumer/protocol"
	"go.gazette.dev/core/message"
)

// Read is one read-uncommitted envelope of a source journal, or the error
// that ended reading. A read error should name the journal and offset.
type Read struct {
	Env message.Envelope
	Err error
	// Skip, if set, is why the content of Env could not be decoded; Env's
	// Message is nil. The pipeline hands it to Pipeline.Skip within a
	// transaction, whose checkpoint then reads past Env.End.
	Skip error
	// Lag is how many bytes Env's journal was written past Env.End when it
	// was read: its reader has that much more to deliver without waiting on
	// writers. It is zero for a read at the journal's write head.
	Lag int64
	// Nudge, if set, holds no message: it begins a transaction if none has
	// begun, so that the application's BeginTxn and FinalizeTxn run on a
	// shard with nothing to read (a change of its spec asks it to act, as
	// a rescale does).
	Nudge bool
}

// Clock is the pipeline's source of time; tests substitute a fake.
type Clock interface {
	Now() time.Time
	// Timer returns a channel which receives once d has passed, and a
	// function that stops the timer.
	Timer(d time.Duration) (<-chan time.Time, func())
}

// Stats describe one fully committed transaction.
type Stats struct {
	Messages int // Messages consumed.
	Skipped  int // Undecodable messages skipped.
	// Retries of handlers, under their failure policies.
	Retries int
	// DeadLettered are messages whose handlers failed, recorded into the
	// dead-letter journal under their failure policies.
	DeadLettered int
	// Fired are the rows expired and timers fired (see runtime.Timekeeper).
	Fired   int
	Bytes   int64         // Bytes of messages consumed.
	Began   time.Time     // First message consumed.
	Consume time.Duration // From Began until FinalizeTxn.
	// Fire is the part of Consume spent firing, as the transaction
	// finished, what fell due while it ran.
	Fire    time.Duration
	Stalled time.Duration // Time spent waiting on the predecessor after MaxDuration.
	// Hurried is the time from Began until the transaction saw its shard
	// hurry (Pipeline.Hurry) and took no more reads; zero if it did not.
	Hurried  time.Duration
	Finalize time.Duration // FinalizeTxn through StartCommit.
	Commit   time.Duration // StartCommit until the commit resolved.
	Ack      time.Duration // Commit until acknowledgements were written.
	// Checkpoint committed by the transaction.
	Checkpoint pc.Checkpoint
	// PublishAt holds, for each journal the transaction acknowledged
	// messages to, the end offset of its acknowledgement: a reader of the
	// journal that reads through it has read every message the transaction
	// published there (the StatResponse.PublishAt of Gazette's consumers).
	PublishAt pb.Offsets
}

// CommitError is the error of a transaction whose commit, as its Store's
// StartCommit resolved it, failed: Pipeline.Run returns it wrapped. Its
// text is Err's.
type CommitError struct {
	Err error
}

// Error returns the text of Err.
func (e *CommitError) Error() string { return e.Err.Error() }

// Unwrap returns Err.
func (e *CommitError) Unwrap() error { return e.Err }

// Limits bound a transaction. A MaxDuration below MinDuration is taken as
// MinDuration.
type Limits struct {
	MinDuration, MaxDuration time.Duration
	WaitForAck               bool
	// MaxTxn ends a transaction's reading once its writes reach it, as
	// MaxDuration does (see Pipeline.MaxTxn).
	MaxTxn runtime.TxnBound
}

// Pipeline runs the transactions of one shard.
type Pipeline struct {
	Shard runtime.Shard
	Store runtime.Store
	App   runtime.Application
	// Publisher through which the application publishes; its journal
	// client is the shard's.
	Publisher *message.Publisher
	// Sequencer, built from the checkpoint the store restored.
	Sequencer *sequence.Sequencer
	// Replay returns an iterator over read-uncommitted envelopes of journal
	// in [begin, end), which the Sequencer needs to re-read a sequence that
	// its ring no longer holds.
	Replay func(journal pb.Journal, begin, end pb.Offset) message.Iterator
	// Pending returns the appends in flight that a commit must wait for: the
	// shard's appends, except those of its recovery log.
	Pending func() client.OpFutures
	Clock   Clock
	// MinDuration and MaxDuration bound each transaction; MaxDuration must
	// be at least MinDuration.
	MinDuration, MaxDuration time.Duration
	// WaitForAck keeps a transaction open, up to MaxDuration, while a
	// message sequence it read awaits its acknowledgement.
	WaitForAck bool
	// MaxTxn, if the Store is a runtime.TxnSizer, bounds what a transaction
	// writes: once its writes reach it (what it fired as it began
	// included), it takes no more reads, as at MaxDuration. The commit in
	// flight is then never larger: a shard reading a backlog, whose
	// transactions would otherwise last MaxDuration, commits in smaller
	// steps, and whoever waits on its commit in flight (a new shard forking
	// from it, a hot standby, a query reading its writes) waits less.
	MaxTxn runtime.TxnBound
	// Limits, if set, is called as each transaction begins, and what it
	// returns replaces MinDuration, MaxDuration, WaitForAck and MaxTxn
	// from that transaction on: a shard's spec changes apply to a running
	// shard. Its error fails the shard.
	Limits func() (Limits, error)
	// ProducerPruneHorizon drops the state of producers that have not
	// written to a journal for this long from checkpoints; zero keeps all.
	ProducerPruneHorizon time.Duration
	// Committed, if set, is told of each transaction once it is fully
	// committed and acknowledged.
	Committed func(Stats)
	// Finalized, if set, is told of each transaction as it has started its
	// commit, with its Stats so far: Began, Consume, Hurried and Finalize.
	Finalized func(Stats)
	// Progress, if set, is told of reads that begin no transaction (a
	// duplicate, a rolled-back message, or an acknowledgement read while
	// no transaction is open) once the transactions before them are done:
	// a shard's read progress must reach them although no commit will
	// report them, as Gazette's consumers report them.
	Progress func(journal pb.Journal, readThrough pb.Offset)
	// Hurry, if set, is asked, while a transaction has begun or waits for
	// its predecessor's commit or acknowledgements, whether the shard
	// hurries. A transaction that has begun then hurries (unless its
	// predecessor hurried itself, and is not done): it takes no more
	// reads, as at MaxDuration (what it has taken and not consumed is its
	// successor's), and finishes once it may but for its predecessor,
	// starting its commit beside its predecessor's, if that's not done,
	// which the Store orders after it (see runtime.Store.StartCommit). One
	// that may not hurry consumes nothing meanwhile: its predecessors'
	// commits go first. A shard splitting its state hurries until its
	// split transaction has started its commit, so that the shards it's
	// split to may read it sooner. A transaction that hurries fires nothing
	// that falls due (see runtime.Timekeeper) as it begins or finalizes:
	// its successor does.
	// It's called often: it must be cheap.
	Hurry func() bool
	// Hurried, if set, returns a channel closed once the shard hurries (as
	// Hurry then reports): a transaction that has begun, waiting on nothing
	// but its predecessor's commit or its timer (the shard's readers, held
	// as it hurries, deliver nothing), hurries at once rather than when one
	// of them ends. A nil channel never closes.
	Hurried func() <-chan struct{}
	// Skip records a Read whose content could not be decoded, within the
	// current transaction: it may publish through pub, and its error fails
	// the shard. A Read to skip fails the shard if Skip is nil.
	//
	// Skip also records, within the transaction, a message whose handler
	// failed under a failure policy (runtime.FailurePolicer) that records
	// dead letters: cause is then a *runtime.HandlerError.
	Skip func(env message.Envelope, cause error, pub *message.Publisher) error
	// Sleep, if set, waits d before a handler's retry (see
	// runtime.FailurePolicy), in place of a timer of Clock.
	Sleep func(ctx context.Context, d time.Duration) error

	// skippedThrough holds, per journal, the end of the last skipped
	// content: checkpoints read at least through it.
	skippedThrough pb.Offsets
	// taken holds the reads last taken from the queue, and next the index
	// of the first not yet handed to the sequencer.
	taken []Read
	next  int
	// polls counts the calls of poll since it last polled a timer.
	polls int
	// msgs holds the messages of the reads taken, for the application's
	// Prefetch.
	msgs []message.Message
}

// txn is the state of one transaction.
type txn struct {
	reads     *Queue           // Nil once reading has ended for this transaction.
	timer     <-chan time.Time // Fires at the min, then the max deadline.
	stopTimer func()
	minDone   bool // MinDuration has passed.
	maxDone   bool // MaxDuration has passed.
	yields    int  // Times reads were found empty, and the goroutine yielded, since reads last arrived.
	// backlogIdle is set once a reader behind its journal's head delivered
	// nothing for backlogIdle: the transaction no longer waits for it.
	backlogIdle bool
	// backlog is the largest Lag of its reads seen since it was created:
	// it waits for readers behind their heads until it has consumed as
	// many bytes (see backlogAhead).
	backlog int64

	// Predecessor barrier: the next of its commit or acks not yet resolved
	// (or of its prior's, first).
	barrier <-chan struct{}
	// prior is the predecessor, if the transaction hurried: it started its
	// commit before the predecessor was done.
	prior *txn
	// due fires once something of the store falls due, while the
	// transaction has not begun; dueChecked tells that it was set.
	due        <-chan time.Time
	stopDue    func()
	dueChecked bool

	stats  Stats
	began  bool
	done   bool // Committed and acknowledged, and reported.
	commit client.OpFuture
	acks   []client.OpFuture
	// idle holds reads that began no transaction while this one was still
	// committing, for Progress once it is done.
	idle pb.Offsets

	stalledAt, finalizeAt, commitAt, committedAt time.Time
}

// Run runs transactions from the checkpoint cp, which the store restored,
// over the reads of the queue, until it closes or ctx is done. It first
// writes the acknowledgements that cp records, in case the process that
// committed it failed before it wrote them. When reads closes, Run commits
// the open transaction, waits for its commit and acknowledgements, and
// returns nil. An error of the application, the store or a read fails the
// shard and is returned.
func (p *Pipeline) Run(ctx context.Context, cp pc.Checkpoint, reads *Queue) error {
	var prev = &txn{commit: client.FinishedOperation(nil), done: len(cp.AckIntents) == 0}
	var now = p.Clock.Now()
	prev.committedAt, prev.commitAt = now, now

	for journal, ack := range cp.AckIntents {
		prev.acks = append(prev.acks, p.resendAck(ctx, journal, ack))
	}

	for {
		var cur = &txn{reads: reads, barrier: firstBarrier(prev)}
		var err = p.run(ctx, cur, prev)
		if cur.began {
			if bf, ok := p.App.(runtime.BeginFinisher); ok {
				if ferr := bf.FinishTxn(p.Shard, p.Store, err); ferr != nil && err == nil {
					err = fmt.Errorf("FinishTxn: %w", ferr)
				}
			}
		}
		if err != nil {
			return err
		}
		if !cur.began {
			// Reads closed with no transaction open: wait out the predecessor.
			return p.drain(ctx, prev)
		}
		prev = cur
	}
}

// run runs cur until it starts to commit, or until reads close with no
// transaction begun.
func (p *Pipeline) run(ctx context.Context, cur, prev *txn) error {
	defer func() {
		if cur.stopTimer != nil {
			cur.stopTimer()
		}
		if cur.stopDue != nil {
			cur.stopDue()
		}
	}()
	for {
		if (cur.barrier != nil || cur.began) && p.shardHurries() {
			if cur.barrier == nil || mayHurry(cur, prev) {
				// It takes no more, as at MaxDuration: its successor
				// consumes what it has taken and not yet consumed.
				cur.reads = nil
				if cur.began && cur.stats.Hurried == 0 {
					cur.stats.Hurried = max(time.Nanosecond, p.Clock.Now().Sub(cur.stats.Began))
				}
			} else {
				// It may not hurry: it consumes nothing while the shard
				// hurries, so that the commits in flight, and their
				// appends, go first.
				if err := p.awaitBarrier(ctx, cur, prev); err != nil {
					return err
				}
				continue
			}
		}
		// Consume the committed messages the sequencer has ready, polling
		// the timer every pollEvery of them so that a long run of ready
		// messages still ends the transaction at MaxDuration.
		if cur.reads != nil && p.Sequencer.Dequeued != nil {
			if tick, ok := p.poll(cur); ok {
				p.onTick(cur, tick)
				continue
			}
			if err := p.consume(ctx, cur, prev); err != nil {
				return err
			}
			continue
		}
		// Hand the reads taken from the queue to the sequencer, polling the
		// timer between them likewise.
		if cur.reads != nil && p.next < len(p.taken) {
			if tick, ok := p.poll(cur); ok {
				p.onTick(cur, tick)
				continue
			}
			var r = p.taken[p.next]
			p.next++
			if err := p.onRead(ctx, cur, prev, r, true); err != nil {
				return err
			}
			continue
		}

		var readCh <-chan struct{}
		if cur.reads != nil {
			readCh = cur.reads.Ready()
		}
		if p.mayFinish(cur, prev) {
			// Nothing compels the transaction to wait: take what is ready,
			// or else start to commit.
			select {
			case <-readCh:
				if err := p.take(ctx, cur, prev); err != nil {
					return err
				}
				continue
			case tick := <-cur.timer:
				p.onTick(cur, tick)
				continue
			default:
			}
			if cur.began && cur.reads != nil && backlogAhead(cur) {
				if cur.yields < maxYields {
					// Reads ran dry for the moment, but a reader has
					// more: let the readers' goroutines, which may just
					// be waiting for a processor, or be decoding the
					// next message, refill them before waiting on a
					// timer. A reader catching up on a backlog delivers
					// again within a few yields.
					cur.yields++
					goruntime.Gosched()
					continue
				}
				if !cur.maxDone && !cur.backlogIdle {
					// The reader's reads keep arriving, and the
					// transaction stays open for them rather than
					// writing its rows now, and again for its
					// successor's reads. It waits no more than
					// backlogIdle for the next.
					if err := p.awaitBacklog(ctx, cur, prev, readCh); err != nil {
						return err
					}
					continue
				}
			}
			if !cur.began {
				// Reads closed, and drained: but for what is due now,
				// which a last transaction fires.
				if isDue, err := p.dueNow(); err != nil {
					return err
				} else if isDue {
					if err = p.begin(cur); err != nil {
						return err
					}
					continue
				}
				return nil
			}
			if cur.barrier != nil {
				cur.prior, prev.prior = prev, nil // It hurries.
			}
			return p.startCommit(cur)
		}
		if !cur.began && !cur.dueChecked {
			if err := p.awaitDue(cur); err != nil {
				return err
			}
		}
		var hurried <-chan struct{}
		if p.Hurried != nil && cur.began && cur.stats.Hurried == 0 {
			hurried = p.Hurried()
		}

		select {
		case <-hurried:
			// The shard hurries: the loop's top sees it.
		case <-cur.due:
			// Something fell due while no transaction ran: one begins, and
			// fires it.
			cur.due = nil
			if err := p.begin(cur); err != nil {
				return err
			}
		case <-readCh:
			if err := p.take(ctx, cur, prev); err != nil {
				return err
			}
		case tick := <-cur.timer:
			p.onTick(cur, tick)
		case <-cur.barrier:
			if err := p.onBarrier(cur, prev); err != nil {
				return err
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// maxYields is how many times in a row a transaction which may finish,
// and waits for a backlog (see backlogAhead), yields its processor for
// reads to arrive before it waits on a timer.
const maxYields = 8

// backlogAhead reports whether cur, which may finish and has nothing to
// take, waits for its readers rather than finishing: a reader is behind its
// journal's write head, and cur has consumed fewer bytes than the largest
// backlog it has seen (cur.backlog, the readers' Lag when reads were taken).
//
// Waiting delays the commit of every message cur has consumed. It pays
// for a shard reading through a backlog, which fills its transactions up
// to MaxDuration, and commits (and writes each row) the fewer times. A
// shard a little behind a steady stream, as one slower for a moment than
// its journals' writers is, finishes a transaction once it has consumed
// as much as it was behind: a message waits for its commit about as long
// as the shard was behind, rather than for as long as writers keep its
// readers behind, up to MaxDuration. A shard at the heads of its journals
// finishes at once, as Gazette's consumers do, and its next transaction
// takes what arrives meanwhile.
func backlogAhead(cur *txn) bool {
	var lag = cur.reads.Lag()
	cur.backlog = max(cur.backlog, lag)
	return lag > 0 && cur.stats.Bytes < cur.backlog
}

// backlogIdle is the longest a transaction which may finish waits for the
// next read of a reader behind its journal's write head. A reader that
// stalls longer (its broker is slow, a fragment is being fetched) ends the
// transaction, as a reader at the head does.
const backlogIdle = 20 * time.Millisecond

// awaitBacklog waits up to backlogIdle for reads to take, or for cur's
// timer. If neither comes, cur stops waiting for the backlog: it finishes
// once reads run dry again.
func (p *Pipeline) awaitBacklog(ctx context.Context, cur, prev *txn, readCh <-chan struct{}) error {
	var idle, stop = p.Clock.Timer(backlogIdle)
	defer stop()
	select {
	case <-readCh:
		return p.take(ctx, cur, prev)
	case tick := <-cur.timer:
		p.onTick(cur, tick)
	case <-idle:
		cur.backlogIdle = true
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

// mayFinish reports whether cur may stop waiting: its predecessor is done,
// or cur has begun and hurries, and it either never began and cannot, or
// has run its minimum duration and has no reason to wait for an
// acknowledgement.
func (p *Pipeline) mayFinish(cur, prev *txn) bool {
	if cur.barrier != nil && !p.hurries(cur, prev) {
		return false
	}
	if !cur.began {
		return cur.reads == nil
	}
	if !cur.minDone {
		return false
	}
	var awaitAck = p.WaitForAck && cur.reads != nil && !cur.maxDone && p.Sequencer.HasPending()
	return !awaitAck
}

// hurries reports whether cur finishes without waiting for prev, which is
// not done.
func (p *Pipeline) hurries(cur, prev *txn) bool {
	return mayHurry(cur, prev) && p.shardHurries()
}

// shardHurries reports whether the shard hurries (see Hurry).
func (p *Pipeline) shardHurries() bool { return p.Hurry != nil && p.Hurry() }

// mayHurry reports whether cur may hurry, if the shard does: if it began,
// and prev did not hurry itself, or prev's prior is done, so that no more
// than two commits are in flight.
func mayHurry(cur, prev *txn) bool {
	return cur.began && (prev.prior == nil || prev.prior.done)
}

// firstBarrier returns the Done channel of the first of prev's prior's and
// prev's commits to wait for, or nil if both are done.
func firstBarrier(prev *txn) <-chan struct{} {
	if pp := prev.prior; pp != nil && !pp.done {
		return pp.commit.Done()
	} else if !prev.done {
		return prev.commit.Done()
	}
	return nil
}

// take takes the queued reads into p.taken; if the queue is closed and
// drained, reading has ended.
func (p *Pipeline) take(ctx context.Context, cur, prev *txn) error {
	var closed bool
	p.taken, closed = cur.reads.Take(p.taken)
	p.next = 0
	if closed {
		return p.onRead(ctx, cur, prev, Read{}, false)
	}
	cur.backlog = max(cur.backlog, cur.reads.Lag())
	cur.yields = 0
	return p.prefetch()
}

// prefetch hands the messages of the reads taken, but acknowledgements, to
// the application, if it is a runtime.Prefetcher, to read ahead the rows
// they will read. Some of them may never be handled (they may be
// duplicates, or roll back): reading ahead is only a hint.
func (p *Pipeline) prefetch() error {
	var pf, ok = p.App.(runtime.Prefetcher)
	if !ok {
		return nil
	}
	clear(p.msgs)
	p.msgs = p.msgs[:0]
	for i := range p.taken {
		var r = &p.taken[i]
		if r.Err != nil || r.Skip != nil || r.Nudge || r.Env.Message == nil ||
			message.GetFlags(r.Env.Message.GetUUID()) == message.Flag_ACK_TXN {
			continue
		}
		p.msgs = append(p.msgs, r.Env.Message)
	}
	if len(p.msgs) == 0 {
		return nil
	}
	if err := pf.Prefetch(p.Shard, p.Store, p.msgs); err != nil {
		return fmt.Errorf("prefetching: %w", err)
	}
	return nil
}

func (p *Pipeline) onRead(ctx context.Context, cur, prev *txn, r Read, ok bool) error {
	cur.yields = 0
	if !ok {
		cur.reads = nil // Reads have ended; don't select them again.
		return nil
	}
	if r.Err != nil {
		return r.Err
	}
	if r.Skip != nil {
		return p.skip(cur, r)
	}
	if r.Nudge {
		return p.begin(cur)
	}
	switch outcome := p.Sequencer.QueueUncommitted(r.Env); outcome {
	case message.QueueAckCommitReplay:
		var journal, begin, end = p.Sequencer.ReplayRange()
		p.Sequencer.StartReplay(p.Replay(journal, begin, end))
		fallthrough
	case message.QueueAckCommitRing, message.QueueAckEmpty, message.QueueOutsideCommit:
		// Committed messages are ready: dequeue the first of them.
		if err := p.Sequencer.Step(); err != nil {
			return fmt.Errorf("sequencing %s at offset %d: %w", r.Env.Journal.Name, r.Env.Begin, err)
		}
	case message.QueueContinueBeginSpan, message.QueueContinueExtendSpan:
		// Uncommitted: its acknowledgement is yet to come.
	case message.QueueAckRollback, message.QueueContinueAlreadyAcked,
		message.QueueContinueTxnClockLarger, message.QueueOutsideAlreadyAcked:
		// A duplicate or rolled-back message: nothing to consume. The
		// sequencer's offsets move past it all the same.
		p.readIdle(cur, prev, r.Env.Journal.Name, r.Env.End)
	default:
		return fmt.Errorf("sequencing %s at offset %d: unexpected outcome %v", r.Env.Journal.Name, r.Env.Begin, outcome)
	}
	return nil
}

func (p *Pipeline) consume(ctx context.Context, cur, prev *txn) error {
	var env = p.Sequencer.Dequeued
	if message.GetFlags(env.Message.GetUUID()) == message.Flag_ACK_TXN {
		// Acknowledgements are the service's business, not the
		// application's; the checkpoint's offsets cover them.
		p.readIdle(cur, prev, env.Journal.Name, env.End)
		return p.step(env)
	}
	if err := p.begin(cur); err != nil {
		return err
	}
	if err := p.consumeMessage(ctx, cur, env); err != nil {
		return fmt.Errorf("consuming journal %s offset %d: %w", env.Journal.Name, env.Begin, err)
	}
	cur.stats.Messages++
	cur.stats.Bytes += env.End - env.Begin
	return p.step(env)
}

// consumeMessage hands env to the application, under the failure policy of
// its handler.
func (p *Pipeline) consumeMessage(ctx context.Context, cur *txn, env *message.Envelope) error {
	var fp, ok = p.App.(runtime.FailurePolicer)
	if !ok {
		return p.App.ConsumeMessage(p.Shard, p.Store, *env, p.Publisher)
	}
	var policy = fp.FailurePolicy(env.Message)
	if policy.Fails() {
		return p.App.ConsumeMessage(p.Shard, p.Store, *env, p.Publisher)
	}
	var sp, isSP = p.Store.(runtime.Savepointer)
	if !isSP {
		return fmt.Errorf("store %T cannot undo the writes of a failed handler call (it is not a runtime.Savepointer), which its failure policy needs", p.Store)
	}
	var deadline = cur.stats.Began.Add(p.MaxDuration)
	for attempt := 1; ; attempt++ {
		sp.Savepoint()
		var err = p.App.ConsumeMessage(p.Shard, p.Store, *env, p.Publisher)
		if err == nil {
			sp.ReleaseSavepoint()
			return nil
		}
		// Whatever follows, the failed call leaves no writes.
		sp.RollbackToSavepoint()
		sp.ReleaseSavepoint()
		if runtime.IsFatal(err) {
			return err
		}
		if attempt <= policy.Retries {
			var d = policy.Delay(attempt - 1)
			if !p.Clock.Now().Add(d).After(deadline) {
				slog.Warn("retrying a failed handler", "shard", p.Shard.Spec().Id, "journal", env.Journal.Name,
					"offset", env.Begin, "attempt", attempt, "backoff", d, "err", err)
				cur.stats.Retries++
				if err = p.sleep(ctx, d); err != nil {
					return err
				}
				continue
			}
		}
		if !policy.DeadLetter {
			return err
		} else if p.Skip == nil {
			return fmt.Errorf("%w (and the shard records no dead letters)", err)
		}
		var he = &runtime.HandlerError{Attempts: attempt, Err: err}
		var me *runtime.MethodError
		if errors.As(err, &me) {
			he.Method, he.Err = me.Method, me.Err
		}
		if serr := p.Skip(*env, he, p.Publisher); serr != nil {
			return fmt.Errorf("%w (and recording it as a dead letter failed: %w)", err, serr)
		}
		cur.stats.DeadLettered++
		return nil
	}
}

// sleep waits d, or until ctx is done.
func (p *Pipeline) sleep(ctx context.Context, d time.Duration) error {
	if p.Sleep != nil {
		return p.Sleep(ctx, d)
	}
	var ch, stop = p.Clock.Timer(d)
	defer stop()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// readIdle notes that journal was read through offset by a read that
// begins no transaction. Within a transaction, its commit reports the read;
// otherwise Progress is told, once the predecessor is done.
func (p *Pipeline) readIdle(cur, prev *txn, journal pb.Journal, offset pb.Offset) {
	switch {
	case cur.began || p.Progress == nil:
	case !prev.done:
		if prev.idle == nil {
			prev.idle = make(pb.Offsets)
		}
		prev.idle[journal] = max(prev.idle[journal], offset)
	default:
		p.Progress(journal, offset)
	}
}

// begin begins cur, unless it has begun.
func (p *Pipeline) begin(cur *txn) error {
	if cur.began {
		return nil
	}
	cur.began = true
	if p.Limits != nil {
		var l, err = p.Limits()
		if err != nil {
			return err
		}
		p.MinDuration, p.MaxDuration, p.WaitForAck = l.MinDuration, max(l.MaxDuration, l.MinDuration), l.WaitForAck
		p.MaxTxn = l.MaxTxn
	}
	if bf, ok := p.App.(runtime.BeginFinisher); ok {
		if err := bf.BeginTxn(p.Shard, p.Store); err != nil {
			return fmt.Errorf("BeginTxn: %w", err)
		}
	}
	cur.stats.Began = p.Clock.Now()
	cur.timer, cur.stopTimer = p.Clock.Timer(p.MinDuration)
	if cur.stopDue != nil {
		cur.stopDue()
		cur.due, cur.stopDue = nil, nil
	}
	if p.shardHurries() {
		// It will take no more reads, and finish once it may: what is
		// due is its successor's, as what falls due as it finalizes, so
		// that the commit the shard hurries for starts sooner.
		return p.setTime()
	}
	return p.fire(cur)
}

// setTime sets the time of the application's transaction, firing nothing.
func (p *Pipeline) setTime() error {
	var tk, ok = p.App.(runtime.Timekeeper)
	if !ok {
		return nil
	}
	if err := tk.SetTime(p.Shard, p.Store, p.Clock.Now(), p.Publisher); err != nil {
		return fmt.Errorf("setting the transaction's time: %w", err)
	}
	return nil
}

// fire has the application fire, within cur, what is due by now, up to
// MaxTxn: the rest begins the next transaction at once.
func (p *Pipeline) fire(cur *txn) error {
	var tk, ok = p.App.(runtime.Timekeeper)
	if !ok {
		return nil
	}
	var n, err = tk.Fire(p.Shard, p.Store, p.Clock.Now(), p.Publisher, p.MaxTxn)
	if err != nil {
		return fmt.Errorf("firing what is due: %w", err)
	}
	cur.stats.Fired += n
	return nil
}

// dueNow reports whether something of the store is due by now.
func (p *Pipeline) dueNow() (bool, error) {
	var tk, ok = p.App.(runtime.Timekeeper)
	if !ok {
		return false, nil
	}
	var at, found, err = tk.Due(p.Shard, p.Store)
	if err != nil {
		return false, fmt.Errorf("reading what is due: %w", err)
	}
	return found && !at.After(p.Clock.Now()), nil
}

// awaitDue sets cur.due to fire once the earliest of what the store holds
// falls due, if anything does.
func (p *Pipeline) awaitDue(cur *txn) error {
	cur.dueChecked = true
	var tk, ok = p.App.(runtime.Timekeeper)
	if !ok {
		return nil
	}
	var at, found, err = tk.Due(p.Shard, p.Store)
	if err != nil {
		return fmt.Errorf("reading what is due: %w", err)
	} else if found {
		cur.due, cur.stopDue = p.Clock.Timer(at.Sub(p.Clock.Now()))
	}
	return nil
}

// skip hands an undecodable read to p.Skip within cur, and moves the
// checkpoint of its journal past it.
func (p *Pipeline) skip(cur *txn, r Read) error {
	var journal = r.Env.Journal.Name
	if p.Skip == nil {
		return fmt.Errorf("journal %s offset %d: %w", journal, r.Env.Begin, r.Skip)
	}
	if err := p.begin(cur); err != nil {
		return err
	}
	if err := p.Skip(r.Env, r.Skip, p.Publisher); err != nil {
		return fmt.Errorf("skipping journal %s offset %d: %w", journal, r.Env.Begin, err)
	}
	if p.skippedThrough == nil {
		p.skippedThrough = make(pb.Offsets)
	}
	p.skippedThrough[journal] = max(p.skippedThrough[journal], r.Env.End)
	cur.stats.Skipped++
	return nil
}

// step moves the sequencer past env, to the next committed message if any.
func (p *Pipeline) step(env *message.Envelope) error {
	var journal, offset = env.Journal.Name, env.Begin
	if err := p.Sequencer.Step(); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("sequencing after %s at offset %d: %w", journal, offset, err)
	}
	return nil
}

// pollEvery is how many messages a transaction consumes, or reads it hands
// to the sequencer, between polls of its timer while they're ready: a poll
// of a timer's channel locks the timer, which costs as much as a few
// percent of a small message's consumption, while pollEvery messages take
// microseconds.
const pollEvery = 16

// poll returns the tick of cur's timer, if it fired, every pollEvery calls;
// it ends cur's reading if cur reached MaxTxn.
func (p *Pipeline) poll(cur *txn) (time.Time, bool) {
	if p.polls++; p.polls < pollEvery {
		return time.Time{}, false
	}
	p.polls = 0
	if p.reachedMax(cur) {
		p.full(cur, p.Clock.Now())
		return time.Time{}, false
	}
	select {
	case tick := <-cur.timer:
		return tick, true
	default:
		return time.Time{}, false
	}
}

// reachedMax reports whether cur has begun and its writes reach MaxTxn.
func (p *Pipeline) reachedMax(cur *txn) bool {
	if !cur.began {
		return false
	}
	var sz, _ = p.Store.(runtime.TxnSizer)
	return p.MaxTxn.Reached(sz)
}

func (p *Pipeline) onTick(cur *txn, tick time.Time) {
	cur.stopTimer()
	if !cur.minDone {
		cur.minDone = true
		if rest := cur.stats.Began.Add(p.MaxDuration).Sub(tick); rest > 0 && !cur.maxDone {
			cur.timer, cur.stopTimer = p.Clock.Timer(rest)
			return
		}
	}
	cur.timer, cur.stopTimer = nil, func() {}
	p.full(cur, tick)
}

// full ends cur's reading at time at: it reached MaxDuration, or its
// writes reached MaxTxn. Its timer, if it has not reached MinDuration,
// still runs.
func (p *Pipeline) full(cur *txn, at time.Time) {
	if cur.maxDone {
		return
	}
	cur.maxDone = true
	cur.reads = nil // Stop reading: the transaction is full.
	if cur.barrier != nil {
		cur.stalledAt = at // It must still wait for its predecessor.
	}
}

// onBarrier handles the resolution of the predecessor's commit or of one of
// its acknowledgements (or its prior's, first), and moves cur.barrier to the
// next unresolved one.
func (p *Pipeline) onBarrier(cur, prev *txn) error {
	for _, t := range [2]*txn{prev.prior, prev} {
		if t == nil || t.done {
			continue
		}
		var next, err = p.resolve(t)
		if err != nil || next != nil {
			cur.barrier = next
			return err
		}
	}
	cur.barrier = nil
	if !cur.stalledAt.IsZero() {
		cur.stats.Stalled = p.Clock.Now().Sub(cur.stalledAt)
	}
	return nil
}

// resolve notes what has resolved, in order, of t's commit and then its
// acknowledgements, and returns the Done channel of the first that has
// not, or nil once all have: t is then done, and reported.
func (p *Pipeline) resolve(t *txn) (<-chan struct{}, error) {
	var now = p.Clock.Now()
	if t.committedAt.IsZero() {
		select {
		case <-t.commit.Done():
		default:
			return t.commit.Done(), nil
		}
		if err := t.commit.Err(); err != nil {
			return nil, fmt.Errorf("committing the previous transaction: %w", &CommitError{Err: err})
		}
		t.committedAt = now
	}
	for _, ack := range t.acks {
		select {
		case <-ack.Done():
			if err := ack.Err(); err != nil {
				return nil, fmt.Errorf("acknowledging the previous transaction: %w", err)
			}
		default:
			return ack.Done(), nil
		}
	}
	t.done = true
	if t.began && p.Committed != nil {
		t.stats.Commit = t.committedAt.Sub(t.commitAt)
		t.stats.Ack = now.Sub(t.committedAt)
		for _, ack := range t.acks {
			if aa, ok := ack.(*client.AsyncAppend); ok {
				if t.stats.PublishAt == nil {
					t.stats.PublishAt = make(pb.Offsets, len(t.acks))
				}
				t.stats.PublishAt[aa.Request().Journal] = aa.Response().Commit.End
			}
		}
		p.Committed(t.stats)
	}
	for journal, offset := range t.idle {
		p.Progress(journal, offset)
	}
	return nil, nil
}

// startCommit finalizes cur and starts its commit and acknowledgements.
func (p *Pipeline) startCommit(cur *txn) error {
	// What fell due while the transaction ran fires within it, unless the
	// shard hurries (it splits), or the transaction reached MaxTxn: then
	// its successor, which begins at once, fires it (and the commit which
	// the shard hurries for starts sooner).
	if !p.shardHurries() && !p.reachedMax(cur) {
		var began = p.Clock.Now()
		if err := p.fire(cur); err != nil {
			return err
		}
		cur.stats.Fire = p.Clock.Now().Sub(began)
	}
	cur.finalizeAt = p.Clock.Now()
	cur.stats.Consume = cur.finalizeAt.Sub(cur.stats.Began)
	if err := p.App.FinalizeTxn(p.Shard, p.Store, p.Publisher); err != nil {
		return fmt.Errorf("FinalizeTxn: %w", err)
	}
	var offsets, states = p.Sequencer.Checkpoint(p.ProducerPruneHorizon)
	if len(p.skippedThrough) != 0 {
		// The sequencer never saw skipped content: read past it all the same.
		offsets = offsets.Copy()
		for journal, end := range p.skippedThrough {
			offsets[journal] = max(offsets[journal], end)
		}
	}
	var intents, err = p.Publisher.BuildAckIntents()
	if err != nil {
		return fmt.Errorf("building acknowledgements: %w", err)
	}
	var cp = pc.BuildCheckpoint(pc.BuildCheckpointArgs{ReadThrough: offsets, ProducerStates: states, AckIntents: intents})

	var commit = p.Store.StartCommit(p.Shard, cp, p.Pending())
	select {
	case <-commit.Done():
		// A commit that failed at once fails the shard now, before the
		// application is handed another message.
		if err = commit.Err(); err != nil {
			return fmt.Errorf("committing: %w", &CommitError{Err: err})
		}
	default:
	}
	cur.commit, cur.commitAt = commit, p.Clock.Now()
	cur.stats.Finalize = cur.commitAt.Sub(cur.finalizeAt)
	cur.stats.Checkpoint = cp
	if p.Finalized != nil {
		p.Finalized(cur.stats)
	}

	// Acknowledgements let readers consume what the transaction published.
	// They are appended only once the commit is durable; if this process
	// fails before they are, the next owner of the shard re-sends them from
	// the checkpoint.
	var ajc = p.Shard.JournalClient()
	for _, intent := range intents {
		var aa = ajc.StartAppend(pb.AppendRequest{Journal: intent.Journal}, client.OpFutures{commit: {}})
		_, _ = aa.Writer().Write(intent.Intent)
		if err = aa.Release(); err != nil {
			return fmt.Errorf("acknowledging to %s: %w", intent.Journal, err)
		}
		cur.acks = append(cur.acks, aa)
	}
	return nil
}

// resendAck appends a recovered acknowledgement. A journal that no longer
// exists is skipped: nobody can read what was published to it.
func (p *Pipeline) resendAck(ctx context.Context, journal pb.Journal, ack []byte) client.OpFuture {
	var op = client.NewAsyncOperation()
	go func() {
		var _, err = client.Append(ctx, p.Shard.JournalClient(), pb.AppendRequest{Journal: journal}, bytes.NewReader(ack))
		if errors.Is(err, client.ErrJournalNotFound) {
			err = nil
		} else if err != nil {
			err = fmt.Errorf("re-sending the recovered acknowledgement to %s: %w", journal, err)
		}
		op.Resolve(err)
	}()
	return op
}

// drain waits until prev's commit and acknowledgements resolve.
func (p *Pipeline) drain(ctx context.Context, prev *txn) error {
	var cur = &txn{barrier: firstBarrier(prev)}
	for cur.barrier != nil {
		if err := p.awaitBarrier(ctx, cur, prev); err != nil {
			return err
		}
	}
	return nil
}

// awaitBarrier waits for cur's barrier to resolve, and handles it.
func (p *Pipeline) awaitBarrier(ctx context.Context, cur, prev *txn) error {
	select {
	case <-cur.barrier:
		return p.onBarrier(cur, prev)
	case <-ctx.Done():
		return ctx.Err()
	}
}
