// Package sequence holds Sequencer, which orders the read-uncommitted
// messages of Gazette journals into the sequences their producers
// acknowledged, by the contract of Gazette's message.Sequencer: the same
// outcomes (message.QueueOutcome), the same dequeued messages, replays and
// checkpoints of producers' states, for every input. It differs in what it
// costs: it counts each message into Prometheus counters it resolved once for
// its journal, flag and outcome, where Gazette's looks its counter up by
// three label values under a lock for every message, and it finds the
// producer of an evicted ring slot by a pointer rather than a map lookup.
//
// Its counters are gazconsumer_sequencer_queued_total{journal,flag,outcome}
// and gazconsumer_sequencer_replayed_total{journal}, with the meaning of
// Gazette's gazette_sequencer_queued and gazette_sequencer_replay: the
// package message, which every gazconsumer binary imports, registers those
// two names with Prometheus' default registry itself, and a second collector
// of either name would collide with it.
package sequence

import (
	"cmp"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	pb "go.gazette.dev/core/broker/protocol"
	"go.gazette.dev/core/message"
)

// The counters of all Sequencers, registered with Prometheus' default
// registry.
var (
	queuedTotal = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "gazconsumer_sequencer_queued_total",
		Help: "Read-uncommitted messages given to a sequencer, by journal, UUID flag and what the sequencer made of them.",
	}, []string{"journal", "flag", "outcome"})
	replayedTotal = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "gazconsumer_sequencer_replayed_total",
		Help: "Messages a sequencer read again from their journal, to dequeue an acknowledged sequence its ring no longer held.",
	}, []string{"journal"})
)

// outcomes is the number of message.QueueOutcome values, from
// QueueOutsideAlreadyAcked (0) to QueueAckCommitReplay.
const outcomes = int(message.QueueAckCommitReplay) + 1

// none marks a span without an offset of its sequence, or without slots.
const none = -1

// Sequencer turns read-uncommitted envelopes, given one at a time to
// QueueUncommitted, into the committed messages of their producers'
// acknowledged sequences, which Step dequeues one at a time into Dequeued.
// It keeps the latest messages read in a ring; an acknowledgement of a
// sequence that began before the ring's oldest message asks the caller for a
// replay of the part it lacks (QueueAckCommitReplay, ReplayRange,
// StartReplay). Checkpoint snapshots the offsets read through and the state
// of each producer, from which New resumes.
//
// It reads a message's UUID once, when it is queued: the caller may change a
// dequeued message (publishing it sets a new UUID) without confusing it.
// A Sequencer is not safe for concurrent use. After Step returns an error
// other than io.EOF, it must not be used further.
type Sequencer struct {
	// Dequeued is the committed message to handle now; it is nil unless a
	// committed sequence is being dequeued. The caller handles it, then calls
	// Step for the next one. Step releases the message of the envelope it
	// replaces.
	Dequeued *message.Envelope

	spans    map[message.JournalProducer]*span
	journals map[pb.Journal]*journal
	// lastSpan and lastJournal are the span and journal of the message last
	// queued: the next message is most often of the same.
	lastSpan    *span
	lastJournal *journal
	// oneOff is the span of a message without a clock, which commits alone
	// and is not remembered.
	oneOff span

	ring []slot
	head int // The slot the next message is written to.

	// commit is the sequence being dequeued, or nil.
	commit *span
	// replay reads again the start of commit that the ring lacks, until it
	// is exhausted; replayed is the envelope it read last.
	replay   message.Iterator
	replayed message.Envelope
	// dequeued is the clock of Dequeued, as read when it was queued, and
	// dequeuedSlot its slot, or none if it was replayed.
	dequeued     message.Clock
	dequeuedSlot int
	// readEnd is the end offset of the last message of commit stepped over,
	// whether or not it was dequeued.
	readEnd pb.Offset

	// A span is pending, begun or extended since the last Checkpoint, if its
	// pendingRound is round; pending counts them.
	round   uint64
	pending int
}

// span is what a Sequencer knows of one producer in one journal: the clocks
// it acknowledged, and the sequence it has begun and not yet acknowledged.
type span struct {
	journal  *journal
	producer message.ProducerID
	// acked is the clock through which the producer's messages are
	// acknowledged (or rolled back): a message of a clock not above it is a
	// duplicate. It rises, while a sequence is dequeued, to the clock of
	// each message dequeued.
	acked message.Clock
	// through is the largest clock of the sequence: a message of the
	// sequence at or below it, and above acked, repeats one read already.
	through message.Clock
	// begin is the offset of the first message of the sequence not yet
	// dequeued, or none if no sequence is begun.
	begin pb.Offset
	// first and last are the ring slots of the messages of the sequence the
	// ring holds, chained by slot.next, or none.
	first, last  int
	pendingRound uint64
}

// slot is a message of the ring.
type slot struct {
	env   message.Envelope
	clock message.Clock // The clock of env's UUID.
	next  int           // The next slot of the same span, or none.
	owner *span         // The span whose sequence holds env, or nil.
}

// journal is what a Sequencer keeps of one journal: the offset it has read
// through, and its counters.
type journal struct {
	name    pb.Journal
	through pb.Offset
	read    bool // Whether through is known.
	// newestAck is the largest acknowledged clock of the journal's spans,
	// found anew by each Checkpoint.
	newestAck message.Clock
	queued    [3][outcomes]prometheus.Counter // By flag and outcome; nil until first counted.
	replayed  prometheus.Counter
}

// New returns a Sequencer that resumes from a checkpoint: offsets are those
// read through, and states are the producers' states, as Checkpoint returned
// them (either may be nil). Its ring holds ringSize messages, at least one.
func New(offsets pb.Offsets, states []message.ProducerState, ringSize int) *Sequencer {
	var s = &Sequencer{
		spans:        make(map[message.JournalProducer]*span, len(states)),
		journals:     make(map[pb.Journal]*journal, len(offsets)),
		ring:         make([]slot, max(ringSize, 1)),
		dequeuedSlot: none,
		round:        1,
	}
	for name, offset := range offsets {
		var j = s.journalOf(name)
		j.through, j.read = offset, true
	}
	for _, st := range states {
		s.spans[st.JournalProducer] = &span{
			journal:  s.journalOf(st.JournalProducer.Journal),
			producer: st.JournalProducer.Producer,
			acked:    st.LastAck,
			through:  st.LastAck,
			begin:    st.Begin,
			first:    none,
			last:     none,
		}
	}
	return s
}

// QueueUncommitted gives the Sequencer the next envelope read uncommitted,
// and returns what it made of it. An outcome of QueueOutsideCommit,
// QueueAckEmpty, QueueAckCommitRing or QueueAckCommitReplay commits a
// sequence, which the caller must then dequeue with Step until io.EOF (after
// StartReplay, for QueueAckCommitReplay). It panics if the sequence last
// committed is not yet dequeued.
func (s *Sequencer) QueueUncommitted(env message.Envelope) message.QueueOutcome {
	if s.commit != nil {
		panic("sequence: QueueUncommitted while a committed sequence awaits Step")
	}
	s.evict()

	var uuid = env.GetUUID()
	var clock, flags = message.GetClock(uuid), message.GetFlags(uuid)
	var sp *span
	var own = clock // The clock the message's slot keeps.
	if clock == 0 {
		// A message of clock zero (a message that does not track its UUID
		// has the zero UUID) commits alone, whatever its flags, and leaves
		// the state of its producer as it was.
		s.oneOff = span{
			journal:  s.journalOf(env.Journal.Name),
			producer: message.GetProducerID(uuid),
			begin:    none,
			first:    none,
			last:     none,
		}
		sp, clock, flags = &s.oneOff, 1, message.Flag_OUTSIDE_TXN
	} else {
		sp = s.spanOf(env.Journal.Name, message.GetProducerID(uuid), clock)
	}

	var outcome = s.judge(&env, sp, clock, flags)
	switch outcome {
	case message.QueueOutsideAlreadyAcked, message.QueueContinueAlreadyAcked,
		message.QueueContinueTxnClockLarger:
		sp.journal.readThrough(env.End)

	case message.QueueContinueBeginSpan, message.QueueContinueExtendSpan:
		if outcome == message.QueueContinueBeginSpan {
			sp.begin = env.Begin
			s.markPending(sp)
		}
		s.push(&env, own, sp)
		sp.through = clock
		sp.journal.readThrough(env.End)

	case message.QueueAckRollback:
		sp.acked, sp.through = clock, clock
		sp.begin, sp.first, sp.last = none, none, none
		s.unmarkPending(sp)
		sp.journal.readThrough(env.End)

	default: // A commit. The journal's offset moves once it is dequeued.
		s.push(&env, own, sp)
		switch outcome {
		case message.QueueAckEmpty:
			sp.begin = env.Begin
		case message.QueueOutsideCommit:
			// Any sequence begun and not acknowledged is dropped: the
			// message commits only itself.
			sp.begin, sp.first = env.Begin, sp.last
		}
		// The acknowledgement commits the sequence through its own clock;
		// messages of the sequence above it are passed over.
		sp.through = clock
		s.commit = sp
	}
	sp.journal.count(flags, outcome)
	return outcome
}

// judge returns the outcome of the message of env, of clock and flags, in
// the span sp, changing nothing.
func (s *Sequencer) judge(env *message.Envelope, sp *span, clock message.Clock, flags message.Flags) message.QueueOutcome {
	switch flags {
	case message.Flag_CONTINUE_TXN:
		switch {
		case clock <= sp.acked:
			return message.QueueContinueAlreadyAcked
		case clock <= sp.through:
			return message.QueueContinueTxnClockLarger
		case sp.begin == none:
			return message.QueueContinueBeginSpan
		}
		return message.QueueContinueExtendSpan

	case message.Flag_ACK_TXN:
		switch {
		case clock < sp.acked:
			// The producer acknowledges less than it did: it is a consumer
			// shard that restarted from an older checkpoint, and re-sends what
			// follows. Taking the older acknowledgement re-reads its messages
			// at least once, rather than risk skipping new ones.
			s.complain(env, sp, "acknowledgement below the producer's last: its messages since are read again (at least once)")
			return message.QueueAckRollback
		case clock == sp.acked:
			return message.QueueAckRollback
		case sp.begin == none:
			return message.QueueAckEmpty
		case sp.first == none || s.ring[sp.first].env.Begin != sp.begin:
			return message.QueueAckCommitReplay // The ring lacks the sequence's start.
		}
		return message.QueueAckCommitRing

	case message.Flag_OUTSIDE_TXN:
	default:
		s.complain(env, sp, "message of unknown UUID flags, taken as outside a transaction")
	}
	if clock <= sp.acked {
		return message.QueueOutsideAlreadyAcked
	}
	if sp.begin != none {
		s.complain(env, sp, "message outside a transaction after one within it, from the same producer: the latter is dropped")
	}
	return message.QueueOutsideCommit
}

// Step dequeues the next message of the committed sequence into Dequeued and
// returns nil, or, once the sequence is done, sets Dequeued to nil and
// returns io.EOF; it returns io.EOF too when there is no committed sequence.
// It returns an error if the replay fails or reads what its range does not
// hold, and panics if the sequence needs a replay and StartReplay was not
// called.
func (s *Sequencer) Step() error {
	var c = s.commit
	if c == nil {
		return io.EOF
	}
	if s.Dequeued != nil {
		// The caller is done with Dequeued: the sequence is acknowledged
		// through it.
		c.acked = s.dequeued
		s.Dequeued.Message = nil
		if s.dequeuedSlot != none {
			s.ring[s.dequeuedSlot].owner = nil
		}
	} else if s.replay == nil && c.begin != s.ring[c.first].env.Begin {
		panic("sequence: Step of a sequence that needs a replay, without StartReplay")
	}

	for c.first != none {
		var env *message.Envelope
		var clock message.Clock
		var at = none
		if s.replay != nil {
			var ok, err = s.readReplay(c)
			if err != nil {
				return err
			} else if !ok {
				continue
			}
			env, clock = &s.replayed, message.GetClock(s.replayed.GetUUID())
		} else {
			at = c.first
			env, clock = &s.ring[at].env, s.ring[at].clock
			c.first = s.ring[at].next
		}
		s.readEnd = env.End

		if clock != 0 && clock <= c.acked {
			// Dequeued already: replays, and a sequence read again across a
			// checkpoint, may repeat messages. Messages without a clock are
			// never taken as repeats.
			continue
		} else if clock > c.through {
			continue // Past what the acknowledgement commits.
		}
		c.begin = env.Begin
		s.Dequeued, s.dequeued, s.dequeuedSlot = env, clock, at
		return nil
	}

	// The sequence is dequeued: its journal is read through its
	// acknowledgement, which was left unread until now so that a checkpoint
	// taken meanwhile has it read again. The span awaits the producer's next
	// sequence.
	c.journal.readThrough(s.readEnd)
	c.through, c.begin, c.first, c.last = c.acked, none, none, none
	s.unmarkPending(c)
	s.Dequeued, s.dequeued, s.dequeuedSlot, s.commit = nil, 0, none, nil
	return io.EOF
}

// readReplay reads the next envelope of the replay of c into s.replayed. It
// returns false if the envelope is not of c's producer, or if the replay is
// exhausted (and then ends it).
func (s *Sequencer) readReplay(c *span) (bool, error) {
	var env, err = s.replay.Next()
	s.replayed = env
	if err == io.EOF {
		s.replay, s.replayed = nil, message.Envelope{}
		return false, nil
	} else if err != nil {
		return false, fmt.Errorf("sequence: replaying %s from offset %d: %w", c.journal.name, c.begin, err)
	}
	if env.Journal.Name != c.journal.name {
		return false, fmt.Errorf("sequence: replay of %s read a message of %s", c.journal.name, env.Journal.Name)
	}
	if to := s.ring[c.first].env.Begin; env.Begin < c.begin || env.End > to {
		return false, fmt.Errorf("sequence: replay of %s [%d, %d) read a message at [%d, %d)",
			c.journal.name, c.begin, to, env.Begin, env.End)
	}
	c.journal.countReplayed()
	return message.GetProducerID(env.GetUUID()) == c.producer, nil
}

// ReplayRange returns the journal and the offsets [begin, end) that
// StartReplay's iterator must read, for Step to dequeue the sequence that
// QueueUncommitted committed with outcome QueueAckCommitReplay. It panics if
// no sequence is committed.
func (s *Sequencer) ReplayRange() (journal pb.Journal, begin, end pb.Offset) {
	var c = s.commit
	if c == nil {
		panic("sequence: ReplayRange without a committed sequence")
	}
	return c.journal.name, c.begin, s.ring[c.first].env.Begin
}

// StartReplay gives the Sequencer the iterator of read-uncommitted envelopes
// of the journal and offsets ReplayRange returned, from which Step dequeues
// the start of the committed sequence. It panics if no sequence is
// committed.
func (s *Sequencer) StartReplay(it message.Iterator) {
	if s.commit == nil {
		panic("sequence: StartReplay without a committed sequence")
	}
	s.replay = it
}

// HasPending reports whether a sequence was begun or extended since the last
// Checkpoint and is not yet acknowledged or rolled back: more of it is likely
// to come.
func (s *Sequencer) HasPending() bool { return s.pending != 0 }

// Checkpoint returns the offsets read through, by journal, and the states of
// producers, which New resumes from; the caller owns both. It forgets each
// producer whose largest clock is older, by more than pruneHorizon, than the
// largest acknowledged clock of any producer of its journal (none if
// pruneHorizon is not positive). Sequences pending before it no longer count
// for HasPending.
func (s *Sequencer) Checkpoint(pruneHorizon time.Duration) (pb.Offsets, []message.ProducerState) {
	for _, j := range s.journals {
		j.newestAck = 0
	}
	for _, sp := range s.spans {
		sp.journal.newestAck = max(sp.journal.newestAck, sp.acked)
	}
	// A Clock counts 100 ns ticks above 4 bits of sequence.
	var horizon message.Clock
	if pruneHorizon > 0 {
		horizon = message.Clock(pruneHorizon/100) << 4
	}

	var states = make([]message.ProducerState, 0, len(s.spans))
	for jp, sp := range s.spans {
		// Clocks are unsigned: as in Gazette, a horizon past the newest
		// acknowledgement wraps around, and forgets every producer.
		if pruneHorizon > 0 && sp.through < sp.journal.newestAck-horizon {
			delete(s.spans, jp)
			if s.lastSpan == sp {
				s.lastSpan = nil
			}
			continue
		}
		states = append(states, message.ProducerState{JournalProducer: jp, LastAck: sp.acked, Begin: sp.begin})
	}
	slices.SortFunc(states, func(a, b message.ProducerState) int {
		if c := cmp.Compare(a.Journal, b.Journal); c != 0 {
			return c
		}
		return slices.Compare(a.Producer[:], b.Producer[:])
	})
	s.round++
	s.pending = 0

	var offsets = make(pb.Offsets, len(s.journals))
	for name, j := range s.journals {
		if j.read {
			offsets[name] = j.through
		}
	}
	return offsets, states
}

// spanOf returns the span of producer in journal name, begun at clock if it
// is new.
func (s *Sequencer) spanOf(name pb.Journal, producer message.ProducerID, clock message.Clock) *span {
	if sp := s.lastSpan; sp != nil && sp.producer == producer && sp.journal.name == name {
		return sp
	}
	var jp = message.JournalProducer{Journal: name, Producer: producer}
	var sp = s.spans[jp]
	if sp == nil {
		// A producer first seen: its messages from clock on are new.
		sp = &span{
			journal:  s.journalOf(name),
			producer: producer,
			acked:    clock - 1,
			through:  clock - 1,
			begin:    none,
			first:    none,
			last:     none,
		}
		s.spans[jp] = sp
	}
	s.lastSpan = sp
	return sp
}

// journalOf returns the journal of name, which it adds if it is new.
func (s *Sequencer) journalOf(name pb.Journal) *journal {
	if j := s.lastJournal; j != nil && j.name == name {
		return j
	}
	var j = s.journals[name]
	if j == nil {
		j = &journal{name: name}
		s.journals[name] = j
	}
	s.lastJournal = j
	return j
}

// push writes env, of clock, into the head slot of the ring, as the last
// message of sp's sequence.
func (s *Sequencer) push(env *message.Envelope, clock message.Clock, sp *span) {
	var at = s.head
	s.ring[at] = slot{env: *env, clock: clock, next: none, owner: sp}
	if sp.last == none {
		sp.first = at
	} else {
		s.ring[sp.last].next = at
	}
	sp.last = at
	if s.head++; s.head == len(s.ring) {
		s.head = 0
	}
}

// evict empties the head slot of the ring, which the next message takes. If
// it holds the first message of its span's sequence that the ring keeps, the
// span's next one becomes its first.
func (s *Sequencer) evict() {
	var sl = &s.ring[s.head]
	if sp := sl.owner; sp != nil && sp.first == s.head {
		if sp.first == sp.last {
			sp.first, sp.last = none, none
		} else {
			sp.first = sl.next
		}
	}
	*sl = slot{next: none}
}

// markPending counts sp as pending, until the next Checkpoint.
func (s *Sequencer) markPending(sp *span) {
	if sp.pendingRound != s.round {
		sp.pendingRound = s.round
		s.pending++
	}
}

// unmarkPending no longer counts sp as pending.
func (s *Sequencer) unmarkPending(sp *span) {
	if sp.pendingRound == s.round {
		sp.pendingRound = 0
		s.pending--
	}
}

// complain logs a message the Sequencer did not expect of its producer.
func (s *Sequencer) complain(env *message.Envelope, sp *span, what string) {
	var uuid = env.GetUUID()
	slog.Error("sequence: "+what,
		"journal", env.Journal.Name, "begin", env.Begin, "end", env.End,
		"producer", message.GetProducerID(uuid), "clock", message.GetClock(uuid), "flags", message.GetFlags(uuid),
		"acked", sp.acked, "through", sp.through, "sequenceBegin", sp.begin)
}

// readThrough records that j is read through offset end.
func (j *journal) readThrough(end pb.Offset) { j.through, j.read = end, true }

// count counts a message of flags queued with outcome.
func (j *journal) count(flags message.Flags, outcome message.QueueOutcome) {
	if flags > message.Flag_ACK_TXN {
		// Unknown flags: counted by their own label, rarely.
		queuedTotal.WithLabelValues(j.name.String(), flags.String(), outcome.String()).Inc()
		return
	}
	var c = &j.queued[flags][outcome]
	if *c == nil {
		*c = queuedTotal.WithLabelValues(j.name.String(), flags.String(), outcome.String())
	}
	(*c).Inc()
}

// countReplayed counts a message replayed.
func (j *journal) countReplayed() {
	if j.replayed == nil {
		j.replayed = replayedTotal.WithLabelValues(j.name.String())
	}
	j.replayed.Inc()
}
