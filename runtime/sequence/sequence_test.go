package sequence_test

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	pb "go.gazette.dev/core/broker/protocol"
	"go.gazette.dev/core/message"

	"github.com/gazconsumer/gazconsumer/runtime/sequence"
)

func TestMain(m *testing.M) {
	// Both sequencers log what they did not expect of a producer, which
	// the generated streams do on purpose.
	logrus.SetLevel(logrus.PanicLevel)
	slog.SetDefault(slog.New(slog.DiscardHandler))
	os.Exit(m.Run())
}

// msg is a message that carries only its UUID.
type msg struct{ uuid message.UUID }

func (m *msg) GetUUID() message.UUID                         { return m.uuid }
func (m *msg) SetUUID(u message.UUID)                        { m.uuid = u }
func (m *msg) NewAcknowledgement(pb.Journal) message.Message { return new(msg) }

// sequencer is what the test asks of both sequencers.
type sequencer interface {
	QueueUncommitted(message.Envelope) message.QueueOutcome
	Step() error
	ReplayRange() (pb.Journal, pb.Offset, pb.Offset)
	StartReplay(message.Iterator)
	HasPending() bool
	Checkpoint(time.Duration) (pb.Offsets, []message.ProducerState)
	dequeued() *message.Envelope
}

type ours struct{ *sequence.Sequencer }

func (s ours) dequeued() *message.Envelope { return s.Dequeued }

type gazettes struct{ *message.Sequencer }

func (s gazettes) dequeued() *message.Envelope { return s.Dequeued }

// input hands out the bytes of a fuzzed input, then zeros.
type input struct{ b []byte }

func (in *input) done() bool { return len(in.b) == 0 }

func (in *input) next() int {
	if len(in.b) == 0 {
		return 0
	}
	var c = in.b[0]
	in.b = in.b[1:]
	return int(c)
}

// world is the journals a generated stream writes and reads, and the two
// sequencers reading them.
type world struct {
	t         *testing.T
	in        *input
	specs     []*pb.JournalSpec
	logs      [][]message.Envelope // Every envelope written, by journal.
	cursors   []int                // The index in logs of the next envelope read.
	producers []message.ProducerID
	clocks    []message.Clock // Each producer's clock.
	acks      [][]message.Clock
	ringSize  int
	ours      sequencer
	theirs    sequencer
}

// compare runs the stream that data describes through our Sequencer and
// Gazette's, failing t where their outcomes, dequeued messages, pending
// states or checkpoints differ.
func compare(t *testing.T, data []byte) {
	var in = &input{b: data}
	var w = &world{t: t, in: in, ringSize: 1 + in.next()%8}
	var journals, producers = 1 + in.next()%3, 1 + in.next()%4
	for i := range journals {
		w.specs = append(w.specs, &pb.JournalSpec{Name: pb.Journal(fmt.Sprintf("a/journal/%d", i))})
	}
	w.logs, w.cursors = make([][]message.Envelope, journals), make([]int, journals)
	var base = message.NewClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	for i := range producers {
		var id message.ProducerID
		if i != 0 || in.next()%4 != 0 { // Sometimes a producer of ID zero.
			id = message.ProducerID{0x01, byte(i), 0xaa, byte(i * 7), 0, byte(i)}
		}
		w.producers = append(w.producers, id)
		w.clocks = append(w.clocks, base+message.Clock(in.next())<<8)
		w.acks = append(w.acks, nil)
	}
	w.ours = ours{sequence.New(nil, nil, w.ringSize)}
	w.theirs = gazettes{message.NewSequencer(nil, nil, w.ringSize)}

	for !in.done() {
		var ok bool
		switch op := in.next() % 16; {
		case op < 11:
			ok = w.read(in.next() % journals)
		case op < 13:
			w.checkpoint()
			ok = true
		case op < 14:
			w.restore()
			ok = true
		default:
			// Time passes for a producer: a jump of its clock.
			var p = in.next() % producers
			w.clocks[p] += message.Clock(in.next()) << (4 + in.next()%30)
			ok = true
		}
		if !ok {
			return
		}
		if a, b := w.ours.HasPending(), w.theirs.HasPending(); a != b {
			t.Fatalf("HasPending: ours %v, Gazette's %v", a, b)
		}
	}
	w.checkpoint()
}

// read reads the next envelope of journal j, writing it first if it is not
// yet written, and gives it to both sequencers. It returns false if both
// failed alike, ending the stream.
func (w *world) read(j int) bool {
	if w.cursors[j] == len(w.logs[j]) {
		w.write(j)
	}
	var env = w.logs[j][w.cursors[j]]
	w.cursors[j]++

	var a, b = w.ours.QueueUncommitted(env), w.theirs.QueueUncommitted(env)
	if a != b {
		w.t.Fatalf("%s [%d, %d) %v: outcome ours %v, Gazette's %v",
			env.Journal.Name, env.Begin, env.End, env.GetUUID(), a, b)
	}
	if a == message.QueueAckCommitReplay {
		var ja, ba, ea = w.ours.ReplayRange()
		var jb, bb, eb = w.theirs.ReplayRange()
		if ja != jb || ba != bb || ea != eb {
			w.t.Fatalf("ReplayRange: ours %s [%d, %d), Gazette's %s [%d, %d)", ja, ba, ea, jb, bb, eb)
		}
		var replay = w.replay(ja, ba, ea)
		w.ours.StartReplay(iterate(replay))
		w.theirs.StartReplay(iterate(replay))
	}
	for n := 0; ; n++ {
		var errA, errB = w.ours.Step(), w.theirs.Step()
		switch {
		case errors.Is(errA, io.EOF) && errors.Is(errB, io.EOF):
			if w.ours.dequeued() != nil || w.theirs.dequeued() != nil {
				w.t.Fatalf("Dequeued is not nil at io.EOF")
			}
			return true
		case errA != nil && errB != nil && !errors.Is(errA, io.EOF) && !errors.Is(errB, io.EOF):
			return false // A replay both found wrong.
		case errA != nil || errB != nil:
			w.t.Fatalf("step %d after %v: ours %v, Gazette's %v", n, a, errA, errB)
		}
		var da, db = w.ours.dequeued(), w.theirs.dequeued()
		if da.Journal.Name != db.Journal.Name || da.Begin != db.Begin || da.End != db.End || da.Message != db.Message {
			w.t.Fatalf("step %d after %v: dequeued ours %s [%d, %d), Gazette's %s [%d, %d)",
				n, a, da.Journal.Name, da.Begin, da.End, db.Journal.Name, db.Begin, db.End)
		}
	}
}

// replay returns the envelopes of journal in [begin, end), and sometimes
// what a faulty replay would: an error, or a message of another journal.
func (w *world) replay(journal pb.Journal, begin, end pb.Offset) []any {
	var out []any
	for j, spec := range w.specs {
		if spec.Name != journal {
			continue
		}
		for _, env := range w.logs[j] {
			if env.Begin >= begin && env.Begin < end {
				out = append(out, env)
			}
		}
	}
	switch w.in.next() % 32 {
	case 0:
		out = append(out[:len(out)/2:len(out)/2], errors.New("replay broke"))
	case 1:
		var other = w.specs[len(w.specs)-1]
		out = append(out, message.Envelope{Journal: other, Begin: begin, End: begin + 1, Message: &msg{}})
	}
	return out
}

// iterate returns an iterator over envelopes and errors.
func iterate(items []any) message.Iterator {
	return message.IteratorFunc(func() (message.Envelope, error) {
		if len(items) == 0 {
			return message.Envelope{}, io.EOF
		}
		var item = items[0]
		items = items[1:]
		if err, ok := item.(error); ok {
			return message.Envelope{}, err
		}
		return item.(message.Envelope), nil
	})
}

// write appends a message of a producer to journal j: a transaction's,
// its acknowledgement, one outside a transaction, a duplicate of an
// earlier one, a rollback, or one without a clock or of unknown flags.
func (w *world) write(j int) {
	var in = w.in
	var p = in.next() % len(w.producers)
	var id, clock = w.producers[p], &w.clocks[p]
	var uuid message.UUID
	switch kind := in.next() % 16; {
	case kind < 7:
		*clock += message.Clock(1 + in.next()%3)
		uuid = message.BuildUUID(id, *clock, message.Flag_CONTINUE_TXN)
	case kind < 10:
		w.acks[p] = append(w.acks[p], *clock)
		uuid = message.BuildUUID(id, *clock, message.Flag_ACK_TXN)
	case kind < 11:
		*clock++
		uuid = message.BuildUUID(id, *clock, message.Flag_OUTSIDE_TXN)
	case kind < 13 && len(w.logs[j]) != 0:
		// A duplicate of an earlier write, as a producer retrying does.
		uuid = w.logs[j][in.next()%len(w.logs[j])].GetUUID()
	case kind < 14 && len(w.acks[p]) != 0:
		// A rollback to an earlier acknowledgement, as a consumer
		// restarted from an older checkpoint sends.
		uuid = message.BuildUUID(id, w.acks[p][in.next()%len(w.acks[p])], message.Flag_ACK_TXN)
	case kind < 15:
		// An acknowledgement of fewer messages than were written.
		uuid = message.BuildUUID(id, *clock-message.Clock(in.next()%4), message.Flag_ACK_TXN)
	default:
		switch in.next() % 3 {
		case 0: // No UUID.
		case 1:
			uuid = message.BuildUUID(id, 0, message.Flags(in.next()%3))
		default:
			*clock++
			uuid = message.BuildUUID(id, *clock, message.Flags(3+in.next()%4))
		}
	}
	var begin pb.Offset
	if n := len(w.logs[j]); n != 0 {
		begin = w.logs[j][n-1].End
	}
	w.logs[j] = append(w.logs[j], message.Envelope{
		Journal: w.specs[j],
		Begin:   begin,
		End:     begin + 1 + pb.Offset(in.next()%40),
		Message: &msg{uuid: uuid},
	})
}

// horizons are the prune horizons checkpoints are taken with.
var horizons = []time.Duration{0, -time.Second, 1, 100, 1600, time.Microsecond, time.Millisecond, time.Second, time.Hour}

// checkpoint takes a checkpoint of both and compares them.
func (w *world) checkpoint() (pb.Offsets, []message.ProducerState) {
	var horizon = horizons[w.in.next()%len(horizons)]
	var oa, sa = w.ours.Checkpoint(horizon)
	var ob, sb = w.theirs.Checkpoint(horizon)
	var byJP = func(a, b message.ProducerState) int {
		if c := cmp.Compare(a.Journal, b.Journal); c != 0 {
			return c
		}
		return slices.Compare(a.Producer[:], b.Producer[:])
	}
	sb = slices.Clone(sb)
	slices.SortFunc(sb, byJP)
	if !slices.IsSortedFunc(sa, byJP) {
		w.t.Fatalf("our checkpoint's states are not sorted: %v", sa)
	}
	if !maps.Equal(oa, ob) || !slices.Equal(sa, sb) {
		w.t.Fatalf("checkpoint (horizon %v):\nours     %v %v\nGazette's %v %v", horizon, oa, sa, ob, sb)
	}
	return maps.Clone(oa), sa
}

// restore restarts both sequencers from a checkpoint, with a ring of
// another size perhaps, and reads each journal again from its offset.
func (w *world) restore() {
	var offsets, states = w.checkpoint()
	if w.in.next()%2 == 0 {
		w.ringSize = 1 + w.in.next()%8
	}
	w.ours = ours{sequence.New(maps.Clone(offsets), states, w.ringSize)}
	w.theirs = gazettes{message.NewSequencer(maps.Clone(offsets), slices.Clone(states), w.ringSize)}
	for j, spec := range w.specs {
		var offset = offsets[spec.Name]
		w.cursors[j] = len(w.logs[j])
		for i, env := range w.logs[j] {
			if env.Begin >= offset {
				w.cursors[j] = i
				break
			}
		}
	}
}

// TestMatchesGazette runs random streams through both sequencers.
func TestMatchesGazette(t *testing.T) {
	var streams = 3000
	if testing.Short() {
		streams = 300
	}
	for seed := range streams {
		var r = rand.New(rand.NewPCG(uint64(seed), 32))
		var data = make([]byte, 200+r.IntN(3000))
		for i := range data {
			data[i] = byte(r.Uint32())
		}
		t.Run(fmt.Sprint(seed), func(t *testing.T) { compare(t, data) })
	}
}

// FuzzMatchesGazette runs fuzzed streams through both sequencers:
// go test -fuzz FuzzMatchesGazette ./runtime/sequence/
func FuzzMatchesGazette(f *testing.F) {
	for seed := range 16 {
		var r = rand.New(rand.NewPCG(uint64(seed), 64))
		var data = make([]byte, 64+r.IntN(1024))
		for i := range data {
			data[i] = byte(r.Uint32())
		}
		f.Add(data)
	}
	f.Fuzz(compare)
}

// TestPanics checks the misuses that panic.
func TestPanics(t *testing.T) {
	var spec = &pb.JournalSpec{Name: "a/journal"}
	var id = message.ProducerID{1, 2, 3, 4, 5, 6}
	var env = func(begin pb.Offset, clock message.Clock, flags message.Flags) message.Envelope {
		return message.Envelope{Journal: spec, Begin: begin, End: begin + 10, Message: &msg{uuid: message.BuildUUID(id, clock, flags)}}
	}
	var mustPanic = func(what string, fn func()) {
		t.Helper()
		defer func() {
			if recover() == nil {
				t.Errorf("%s did not panic", what)
			}
		}()
		fn()
	}
	var s = sequence.New(nil, nil, 1)
	mustPanic("ReplayRange without a commit", func() { s.ReplayRange() })
	mustPanic("StartReplay without a commit", func() { s.StartReplay(nil) })

	s.QueueUncommitted(env(0, 10, message.Flag_CONTINUE_TXN))
	s.QueueUncommitted(env(10, 11, message.Flag_CONTINUE_TXN)) // Evicts the first.
	if got := s.QueueUncommitted(env(20, 11, message.Flag_ACK_TXN)); got != message.QueueAckCommitReplay {
		t.Fatalf("outcome %v", got)
	}
	mustPanic("QueueUncommitted before dequeuing", func() { s.QueueUncommitted(env(30, 12, message.Flag_OUTSIDE_TXN)) })
	mustPanic("Step without StartReplay", func() { _ = s.Step() })
}

// benchStream returns n envelopes of a consumer's reads: producers each
// writing transactions of 1 to 16 messages and their acknowledgements,
// interleaved across journals.
func benchStream(n int) []message.Envelope {
	var r = rand.New(rand.NewPCG(1, 2))
	const journals, producers = 4, 8
	var specs [journals]*pb.JournalSpec
	var offsets [journals]pb.Offset
	for j := range specs {
		specs[j] = &pb.JournalSpec{Name: pb.Journal(fmt.Sprintf("bench/journal/%d", j))}
	}
	type producer struct {
		id      message.ProducerID
		clock   message.Clock
		journal int
		left    int // Messages left in its transaction.
	}
	var ps [producers]producer
	for i := range ps {
		ps[i] = producer{id: message.ProducerID{1, byte(i), 2, 3, 4, 5}, clock: message.NewClock(time.Now()), journal: i % journals}
	}
	var out = make([]message.Envelope, 0, n)
	for len(out) < n {
		var p = &ps[r.IntN(producers)]
		var flags = message.Flag_CONTINUE_TXN
		if p.left == 0 {
			p.left = 1 + r.IntN(16)
		} else if p.left--; p.left == 0 {
			flags = message.Flag_ACK_TXN
		}
		p.clock++
		var begin = offsets[p.journal]
		offsets[p.journal] += 100
		out = append(out, message.Envelope{
			Journal: specs[p.journal], Begin: begin, End: begin + 100,
			Message: &msg{uuid: message.BuildUUID(p.id, p.clock, flags)},
		})
	}
	return out
}

// BenchmarkSequencer sequences a consumer's reads with Gazette's Sequencer
// and ours, with the ring of runtime/replica, a checkpoint every 1,024
// messages: an op is a message queued and, once committed, dequeued.
func BenchmarkSequencer(b *testing.B) {
	const ring, block = 8192, 1 << 16
	var stream = benchStream(block)
	for _, impl := range []struct {
		name string
		new  func() sequencer
	}{
		{"gazette", func() sequencer { return gazettes{message.NewSequencer(nil, nil, ring)} }},
		{"ours", func() sequencer { return ours{sequence.New(nil, nil, ring)} }},
	} {
		b.Run(impl.name, func(b *testing.B) {
			b.ReportAllocs()
			var s = impl.new()
			var i = 0
			for b.Loop() {
				if i == block {
					// The stream's clocks start over: so does the sequencer.
					b.StopTimer()
					s, i = impl.new(), 0
					b.StartTimer()
				}
				switch s.QueueUncommitted(stream[i]) {
				case message.QueueAckCommitRing, message.QueueAckEmpty, message.QueueOutsideCommit:
					for s.Step() == nil {
					}
				case message.QueueAckCommitReplay:
					b.Fatal("the ring is too small for the stream")
				}
				if i++; i%1024 == 0 {
					s.Checkpoint(0)
				}
			}
		})
	}
}

// TestPruneBoundary checks, against Gazette's, which producers a
// checkpoint forgets: those whose largest clock is older than the
// journal's newest acknowledgement by more than the horizon, to the tick,
// and every one when the horizon reaches back past clock zero.
func TestPruneBoundary(t *testing.T) {
	const horizon = time.Millisecond
	var back = message.Clock(horizon/100) << 4
	var state = func(journal pb.Journal, p byte, ack message.Clock) message.ProducerState {
		return message.ProducerState{
			JournalProducer: message.JournalProducer{Journal: journal, Producer: message.ProducerID{p}},
			LastAck:         ack,
			Begin:           -1,
		}
	}
	var now = message.NewClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	for _, tc := range []struct {
		name   string
		states []message.ProducerState
		kept   int
	}{
		{"at and past the horizon", []message.ProducerState{
			state("a", 1, now), state("a", 2, now-back), state("a", 3, now-back-1), state("b", 4, now-back-1),
		}, 3},
		{"clocks below the horizon", []message.ProducerState{state("a", 1, back-1), state("a", 2, 1)}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var _, ours = sequence.New(nil, slices.Clone(tc.states), 1).Checkpoint(horizon)
			var _, theirs = message.NewSequencer(nil, slices.Clone(tc.states), 1).Checkpoint(horizon)
			if len(ours) != tc.kept || len(theirs) != tc.kept {
				t.Errorf("kept %d of ours, %d of Gazette's; want %d", len(ours), len(theirs), tc.kept)
			}
		})
	}
}

// TestCommitted reads a stream read-committed, through a ring small enough
// to replay, and checks it gives what Gazette's Sequencer dequeues.
func TestCommitted(t *testing.T) {
	var stream = benchStream(5000)
	var inRange = func(journal pb.Journal, begin, end pb.Offset) []any {
		var out []any
		for _, env := range stream {
			if env.Journal.Name == journal && env.Begin >= begin && env.Begin < end {
				out = append(out, env)
			}
		}
		return out
	}
	var want []message.Envelope
	var theirs = message.NewSequencer(nil, nil, 4)
	for _, env := range stream {
		if theirs.QueueUncommitted(env) == message.QueueAckCommitReplay {
			theirs.StartReplay(iterate(inRange(theirs.ReplayRange())))
		}
		for theirs.Step() == nil {
			want = append(want, *theirs.Dequeued)
		}
	}

	var all = make([]any, len(stream))
	for i, env := range stream {
		all[i] = env
	}
	var replays int
	var c = &sequence.Committed{
		Sequencer:   sequence.New(nil, nil, 4),
		Uncommitted: iterate(all),
		Replay: func(journal pb.Journal, begin, end pb.Offset) (message.Iterator, error) {
			replays++
			return iterate(inRange(journal, begin, end)), nil
		},
	}
	for i := 0; ; i++ {
		var env, err = c.Next()
		if errors.Is(err, io.EOF) {
			if i != len(want) {
				t.Fatalf("read %d committed messages, want %d", i, len(want))
			}
			break
		} else if err != nil {
			t.Fatal(err)
		}
		if i == len(want) || env.Journal.Name != want[i].Journal.Name || env.Begin != want[i].Begin {
			t.Fatalf("message %d: %s at %d", i, env.Journal.Name, env.Begin)
		}
	}
	if replays == 0 {
		t.Error("no replays")
	}

	// Failures of reads and of replays are returned, with context.
	var broke = errors.New("broke")
	c = &sequence.Committed{Sequencer: sequence.New(nil, nil, 4), Uncommitted: iterate([]any{broke})}
	if _, err := c.Next(); !errors.Is(err, broke) {
		t.Errorf("read failure: %v", err)
	}
	c = &sequence.Committed{
		Sequencer:   sequence.New(nil, nil, 1),
		Uncommitted: iterate(all),
		Replay: func(pb.Journal, pb.Offset, pb.Offset) (message.Iterator, error) {
			return nil, broke
		},
	}
	for {
		if _, err := c.Next(); errors.Is(err, broke) {
			break
		} else if err != nil {
			t.Fatalf("replay failure: %v", err)
		}
	}
}
