package recoverylog

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"go.gazette.dev/core/broker/client"
	pb "go.gazette.dev/core/broker/protocol"
)

// Player plays a recovery log back into an empty local directory. It either
// tails the log as a hot standby, or, once FinishAtWriteHead is called,
// reads to the log's write head and fences the log, so that its author
// becomes the one writer of the log.
type Player struct {
	// DoNotProxy reads persisted fragments of the log straight from their
	// fragment stores, through the URLs brokers sign, rather than through
	// the brokers: about twice as fast, and what Gazette's own players do.
	// The process must be able to open those URLs: for file:// stores, see
	// client.InstallFileTransport. Set it before Play. If Play finds that
	// the process cannot open them, it logs a warning and reads through the
	// brokers, as the process's other players of logs of that store then do
	// for a while, without probing it again.
	DoNotProxy bool
	direct     bool // DoNotProxy, unless direct reads were found to fail.
	// FileRoot is the local path which roots the log's file:// fragment
	// store, as given to client.InstallFileTransport (a broker's
	// --broker.file-root), if any. With DoNotProxy, a playback then maps
	// the files of the persisted, uncompressed fragments of its hinted
	// ranges into memory and plays their bytes in place, without the copies
	// a read of them through their URLs makes, checking ops on another
	// goroutine ahead of their writes; content it can't map so is read
	// through the URLs, or the brokers. Set it before Play.
	FileRoot string

	jc      pb.RoutedJournalClient
	journal pb.Journal
	dir     string
	author  Author

	finishOnce sync.Once
	finishCh   chan struct{}
	tailingCh  chan struct{} // Closed once playback first reaches the write head.

	fsm       *FSM
	files     map[Fnode]*os.File
	behind    writeBehind
	bytesRead atomic.Int64
	offset    atomic.Int64 // Log offset through which ops were read.
}

// NewPlayer returns a Player of journal into dir, which hands the log over
// to author when it finishes.
func NewPlayer(jc pb.RoutedJournalClient, journal pb.Journal, dir string, author Author) *Player {
	return &Player{
		jc:        jc,
		journal:   journal,
		dir:       dir,
		author:    author,
		finishCh:  make(chan struct{}),
		tailingCh: make(chan struct{}),
		files:     make(map[Fnode]*os.File),
		behind:    newWriteBehind(startWriteback),
	}
}

// FinishAtWriteHead asks Play to read through the log's current write head,
// fence the log, and return. It may be called before or during Play.
func (p *Player) FinishAtWriteHead() { p.finishOnce.Do(func() { close(p.finishCh) }) }

// Tailing is closed once Play has read through the write head the log had
// when it started: from then on the player follows the log live, and its
// directory lags the log's writer by no more than the ops in flight. A hot
// standby is ready to take over once Tailing is closed.
func (p *Player) Tailing() <-chan struct{} { return p.tailingCh }

// BytesRead is the number of log bytes Play has read.
// It may be called while Play runs.
func (p *Player) BytesRead() int64 { return p.bytesRead.Load() }

// Offset is the log offset through which Play has read ops: during the
// replay of hints, within their segments; then, of the log after them. It
// may be called while Play runs.
func (p *Player) Offset() int64 { return p.offset.Load() }

// Play plays the log into the player's directory, which must be empty, from
// hints or, if hints is nil, from the log's start. It returns once
// FinishAtWriteHead is called and the log is fenced, with the FSM of the log
// through the player's Fence op, from which a Recorder continues. It returns
// an error naming the journal and offset of invalid log content, or the
// context's error if it's cancelled first.
func (p *Player) Play(ctx context.Context, hints *Hints) (*FSM, error) {
	defer p.closeFiles()
	p.removeScratch()

	if p.author == 0 {
		return nil, fmt.Errorf("playing %s: author must be non-zero", p.journal)
	} else if entries, err := os.ReadDir(p.dir); err != nil {
		return nil, fmt.Errorf("playing %s: %w", p.journal, err)
	} else if len(entries) != 0 {
		return nil, fmt.Errorf("playing %s: directory %s is not empty", p.journal, p.dir)
	}
	p.fsm = NewFSM()
	if err := p.probe(ctx, hints); err != nil {
		return nil, err
	}

	if hints != nil {
		if err := p.playHints(ctx, hints); err != nil {
			return nil, err
		}
	}

	// Catch up with the write head, then tail the log until asked to finish.
	if err := p.read(ctx, p.fsm.NextOffset(), 0, false); !errors.Is(err, client.ErrOffsetNotYetAvailable) {
		if err == nil {
			err = fmt.Errorf("playing %s: read ended before the write head", p.journal)
		}
		return nil, err
	}
	close(p.tailingCh)

	var tailCtx, cancel = context.WithCancel(ctx)
	go func() {
		select {
		case <-p.finishCh:
		case <-tailCtx.Done():
		}
		cancel()
	}()
	var err = p.read(tailCtx, p.fsm.NextOffset(), 0, true)
	cancel()
	if ctx.Err() != nil {
		return nil, ctx.Err()
	} else if !errors.Is(err, context.Canceled) {
		return nil, err
	}

	for {
		// Read through the write head, then fence the log there.
		if err = p.read(ctx, p.fsm.NextOffset(), 0, false); !errors.Is(err, client.ErrOffsetNotYetAvailable) {
			return nil, err
		}
		var seq = p.fsm.NextSeq()
		var fence = &Op{
			Seq:      seq,
			Checksum: p.fsm.NextChecksum(),
			Author:   uint32(p.author),
			Kind:     &Op_Fence{Fence: &Fence{}},
		}
		var frame, opBytes, err = appendFrame(nil, fence, nil)
		if err != nil {
			return nil, err
		}
		resp, err := appendFence(ctx, p.jc, p.journal, p.author, frame)
		if err != nil {
			return nil, err
		} else if resp.Commit.Begin < p.fsm.NextOffset() {
			return nil, fmt.Errorf("%w: journal %s: write head %d is before the end %d of the played history (were hints of another log?)",
				ErrCorrupt, p.journal, resp.Commit.Begin, p.fsm.NextOffset())
		}
		switch {
		case resp.Commit.Begin == p.fsm.NextOffset() && resp.Commit.End == resp.Commit.Begin+int64(len(frame)):
			// The log holds our Fence, as appended, right after the played
			// history: it's applied as a read of it would, without one.
			if _, err = p.fsm.Apply(fence, opBytes, resp.Commit.Begin, resp.Commit.End); err != nil {
				return nil, fmt.Errorf("playing %s: applying its fence at %d: %w", p.journal, resp.Commit.Begin, err)
			}
		default:
			// Read through our Fence. Ops of the deposed author (or a copy
			// of our Fence, appended again) may precede it.
			if err = p.read(ctx, p.fsm.NextOffset(), resp.Commit.End, true); err != nil {
				return nil, err
			}
		}
		if p.fsm.Author() == p.author && p.fsm.NextSeq() == seq+1 && p.fsm.NextOffset() == resp.Commit.End {
			slog.Info("recovery log fenced", "journal", p.journal, "author", p.author,
				"offset", resp.Commit.Begin, "seq", seq, "bytesRead", p.bytesRead.Load())
			return p.fsm, nil
		}
		// Another op took our Fence's seq: fence again after it.
	}
}

// PlayToWriteHead plays the log into the player's directory, which must be
// empty, from hints or, if hints is nil, from the log's start, through the
// write head the log has once its read gets there, and returns without
// fencing the log: the directory then holds a copy of the log's files as of
// that point, while its writer goes on. A new shard forked from another
// reads the other's state so. It returns an error naming the journal and
// offset of invalid log content, or the context's error.
func (p *Player) PlayToWriteHead(ctx context.Context, hints *Hints) error {
	return p.PlayTo(ctx, hints, 0)
}

// PlayTo is PlayToWriteHead, through log offset end rather than the write
// head, if end is not zero: the directory then holds the log's files as of
// end, whatever is written after it. end must be the end of an op (a write
// head the log had is one), at or after the end of hints.
func (p *Player) PlayTo(ctx context.Context, hints *Hints, end int64) error {
	defer p.closeFiles()
	p.removeScratch()
	if entries, err := os.ReadDir(p.dir); err != nil {
		return fmt.Errorf("playing %s: %w", p.journal, err)
	} else if len(entries) != 0 {
		return fmt.Errorf("playing %s: directory %s is not empty", p.journal, p.dir)
	}
	p.fsm = NewFSM()
	if err := p.probe(ctx, hints); err != nil {
		return err
	}
	if hints != nil {
		if err := p.playHints(ctx, hints); err != nil {
			return err
		}
	}
	if end != 0 {
		if next := p.fsm.NextOffset(); next > end {
			return fmt.Errorf("playing %s: hints end at offset %d, after the end %d to play to", p.journal, next, end)
		}
		return p.read(ctx, p.fsm.NextOffset(), end, true)
	}
	if err := p.read(ctx, p.fsm.NextOffset(), 0, false); !errors.Is(err, client.ErrOffsetNotYetAvailable) {
		if err == nil {
			err = fmt.Errorf("playing %s: read ended before the write head", p.journal)
		}
		return err
	}
	return nil
}

// PlayOn plays on, into the player's directory, from where its last PlayTo
// or PlayOn through an end ended, through end, a later end of an op: the
// directory then holds the log's files as of end, as if PlayTo had played
// through end.
func (p *Player) PlayOn(ctx context.Context, end int64) error {
	defer p.closeFiles()
	if p.fsm == nil {
		return fmt.Errorf("playing %s on: it was not played", p.journal)
	} else if next := p.fsm.NextOffset(); next > end {
		return fmt.Errorf("playing %s on: it was played through offset %d, after the end %d to play to", p.journal, next, end)
	}
	return p.read(ctx, p.fsm.NextOffset(), end, true)
}

// Hints returns hints of the log as played through: those of the files
// of the player's directory, which another log may adopt (see Adopt), once
// PlayTo or PlayOn has returned.
func (p *Player) Hints() (*Hints, error) {
	if p.fsm == nil {
		return nil, fmt.Errorf("playing %s: it was not played", p.journal)
	}
	return p.fsm.Hints(p.journal.String()), nil
}

// file returns the open file of node fn, opening it again (by a link other
// than except, which the op being played adds) if the player closed its
// files since it created it.
func (p *Player) file(fn Fnode, except string) (*os.File, error) {
	if f := p.files[fn]; f != nil {
		return f, nil
	}
	var i = slices.IndexFunc(p.fsm.Links(fn), func(l string) bool { return l != except })
	if i == -1 {
		return nil, fmt.Errorf("node %d has no link to open it by", fn)
	}
	var f, err = os.OpenFile(p.localPath(p.fsm.Links(fn)[i]), os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("opening node %d again: %w", fn, err)
	}
	p.files[fn] = f
	return f, nil
}

// playHints replays the segments of hints' live nodes.
func (p *Player) playHints(ctx context.Context, h *Hints) error {
	if h.Log != p.journal.String() {
		return fmt.Errorf("hints are of log %s, not %s", h.Log, p.journal)
	} else if err := validateHints(h); err != nil {
		return err
	}
	p.fsm.beginHinted(h)

	// Reads of the next ranges start while the current one plays, so that
	// their streams are open and their first bytes buffered when it ends.
	var ranges = hintedRanges(h)
	var sources = make([]*source, len(ranges))
	defer func() {
		for _, src := range sources {
			if src != nil {
				src.stop()
			}
		}
	}()
	for i, r := range ranges {
		for j := i; j < min(i+1+rangesAhead, len(ranges)); j++ {
			if sources[j] == nil {
				sources[j] = p.openHinted(ctx, ranges[j].FirstOffset, ranges[j].EndOffset)
			}
		}
		p.fsm.resetChain(r.FirstSeq, r.FirstChecksum, r.FirstOffset, Author(r.Author))
		// Hinted content is committed: reaching the write head before it is an error.
		var err = p.playFrom(ctx, sources[i], r.FirstOffset, r.EndOffset)
		sources[i].stop()
		var head = sources[i].writeHead()
		sources[i] = nil
		if errors.Is(err, client.ErrOffsetNotYetAvailable) && head >= r.EndOffset {
			// The log holds the range (its write head is past it), but the
			// broker which served the read does not yet: a broker newly
			// handed the journal blocks reads of a fragment still being
			// persisted by another. Read the rest again, waiting for it.
			slog.Warn("hinted log content is not yet served; waiting for it", "journal", p.journal,
				"offset", p.fsm.NextOffset(), "segmentEnd", r.EndOffset, "writeHead", head)
			var src = p.open(ctx, p.fsm.NextOffset(), r.EndOffset, true)
			err = p.playFrom(ctx, src, p.fsm.NextOffset(), r.EndOffset)
			src.stop()
		}
		if errors.Is(err, client.ErrOffsetNotYetAvailable) {
			return fmt.Errorf("%w: journal %s offset %d: hinted segment [%d, %d) is beyond the write head",
				ErrCorrupt, p.journal, p.fsm.NextOffset(), r.FirstOffset, r.EndOffset)
		} else if err != nil {
			return err
		}
		if p.fsm.NextSeq() <= r.LastSeq {
			return fmt.Errorf("%w: journal %s offset %d: hinted seqs %d through %d, but valid history ends at %d",
				ErrCorrupt, p.journal, r.FirstOffset, r.FirstSeq, r.LastSeq, p.fsm.NextSeq()-1)
		}
	}
	if err := p.fsm.endHinted(h); err != nil {
		return err
	}
	for name, content := range h.Properties {
		if err := p.writeProperty(name, content); err != nil {
			return err
		}
	}
	return nil
}

// hintedRanges returns the segments of h's live nodes, ordered and merged
// where they overlap or lie within segmentGap of each other.
func hintedRanges(h *Hints) []*Segment {
	var all []*Segment
	for _, ln := range h.LiveNodes {
		for _, s := range ln.Segments {
			all = append(all, cloneSegment(s))
		}
	}
	slices.SortFunc(all, func(a, b *Segment) int {
		if a.FirstOffset != b.FirstOffset {
			return int(min(max(a.FirstOffset-b.FirstOffset, -1), 1))
		}
		return int(min(max(int64(a.FirstSeq)-int64(b.FirstSeq), -1), 1))
	})
	var out []*Segment
	for _, s := range all {
		if l := len(out); l != 0 && s.FirstOffset-out[l-1].EndOffset <= segmentGap {
			var last = out[l-1]
			if s.EndOffset > last.EndOffset {
				last.EndOffset = s.EndOffset
			}
			last.LastSeq = max(last.LastSeq, s.LastSeq)
			continue
		}
		out = append(out, s)
	}
	return out
}

// rangesAhead is how many hinted ranges after the current one are read
// ahead of their playback.
const rangesAhead = 2

// source is a read of the log from an offset, through an end if non-zero,
// whose content is read ahead of its consumer: a stream of the log, or the
// log's fragment files, mapped.
type source struct {
	rr     *client.RetryReader
	ra     *readahead
	mapped *mappedBytes
}

// open starts a read of the log from offset through end (if non-zero).
func (p *Player) open(ctx context.Context, offset, end int64, block bool) *source {
	var rr = client.NewRetryReader(ctx, p.jc, pb.ReadRequest{
		Journal:    p.journal,
		Offset:     offset,
		EndOffset:  end,
		Block:      block,
		DoNotProxy: p.direct,
	})
	var limit int64
	if end != 0 {
		limit = end - offset
	}
	return &source{rr: rr, ra: newReadahead(rr, limit)}
}

// openHinted starts a read of hinted log content [offset, end): of its
// fragment files, mapped, if the player can map them, else a stream.
func (p *Player) openHinted(ctx context.Context, offset, end int64) *source {
	var m = p.mapRange(ctx, offset, end)
	if m == nil {
		return p.open(ctx, offset, end, false)
	} else if m.mappedEnd >= end {
		return &source{mapped: m}
	}
	// The fragments after those mapped are read as they'd all be.
	var rest = p.open(ctx, m.mappedEnd, end, false)
	m.rest = newBufferedBytes(rest.ra, end-m.mappedEnd)
	rest.mapped = m
	return rest
}

// stop cancels the read and waits for its goroutine.
func (src *source) stop() {
	if src.mapped != nil {
		src.mapped.unmap()
	}
	if src.rr != nil {
		src.rr.Cancel()
		src.ra.stop()
	}
}

// writeHead is the log's write head as the source's read last saw it, or
// zero if unknown.
func (src *source) writeHead() int64 {
	if src.rr == nil {
		return 0 // Mapped fragments are persisted: the write head is past them.
	}
	return src.rr.Reader.Response.WriteHead
}

// offset is the log offset the source has read through.
func (src *source) offset() int64 {
	if src.rr == nil {
		return src.mapped.mappedEnd
	}
	return src.rr.Offset()
}

// read reads and plays ops of the log from offset through end (if non-zero),
// or until an error. It returns nil only on reaching end. A non-blocking read
// returns client.ErrOffsetNotYetAvailable when it reaches the write head at
// the end of an op.
func (p *Player) read(ctx context.Context, offset, end int64, block bool) error {
	if end != 0 && offset >= end {
		return nil
	}
	var src = p.open(ctx, offset, end, block)
	defer src.stop()
	return p.playFrom(ctx, src, offset, end)
}

// playFrom plays ops of src, a read from offset through end (if non-zero).
func (p *Player) playFrom(ctx context.Context, src *source, offset, end int64) (err error) {
	if end != 0 && offset >= end {
		return nil
	}
	var limit int64
	if end != 0 {
		limit = end - offset
	}
	// Frames are decoded and checked ahead, in a goroutine of their own.
	var ahead *decodeAhead
	if src.mapped != nil {
		var cancel = func() {}
		if src.rr != nil {
			cancel = src.rr.Cancel
		}
		var m = src.mapped
		ahead = newDecodeAhead(p.journal, &decoder{src: m, offset: offset}, func() bool { return m.inPlace }, cancel)
		// The frames' bytes are of mapped files, which a write reads too.
		defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
		defer func() {
			if r := recover(); r != nil {
				err = mappedFault(p.journal, ahead.offset, r)
			}
		}()
	} else {
		ahead = newDecodeAhead(p.journal, newDecoder(src.ra, offset, limit), func() bool { return false }, src.rr.Cancel)
	}
	defer ahead.stop()
	var next, decoded = ahead.next, func() int64 { return ahead.offset }
	var f frame
	for {
		err = next(&f)
		if err == nil {
			p.bytesRead.Add(f.end - f.begin)
			p.offset.Store(f.end)
			if end != 0 && f.end > end {
				return fmt.Errorf("%w: journal %s offset %d: op %d ends at %d, past the range end %d",
					ErrCorrupt, p.journal, f.begin, f.op.Seq, f.end, end)
			} else if err = p.play(ctx, &f); err != nil {
				return fmt.Errorf("journal %s offset %d: %w", p.journal, f.begin, err)
			}
			ahead.release(&f)
			continue
		}
		var partial errPartial
		var isPartial = errors.As(err, &partial)
		switch {
		case errors.Is(err, ErrCorrupt):
			return fmt.Errorf("journal %s offset %d: %w", p.journal, decoded(), err)
		case errors.Is(err, client.ErrOffsetJump):
			return fmt.Errorf("%w: journal %s offset %d: log content is missing (pruned?); next offset is %d",
				ErrCorrupt, p.journal, decoded(), src.offset())
		case errors.Is(err, io.EOF) && !isPartial && end != 0 && decoded() == end:
			return nil
		case (errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)) && end != 0:
			return fmt.Errorf("%w: journal %s offset %d: op crosses the end %d of hinted content", ErrCorrupt, p.journal, decoded(), end)
		case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
			return fmt.Errorf("%w: journal %s offset %d: truncated op (read ends at %d)", ErrCorrupt, p.journal, decoded(), src.offset())
		case isPartial && errors.Is(err, client.ErrOffsetNotYetAvailable):
			return fmt.Errorf("%w: journal %s offset %d: truncated op at the write head %d", ErrCorrupt, p.journal, decoded(), src.offset())
		case isPartial && ctx.Err() == nil:
			return fmt.Errorf("journal %s offset %d: %w", p.journal, decoded(), err)
		case isPartial:
			return ctx.Err()
		default:
			return err // A read error at an op's boundary, like ErrOffsetNotYetAvailable.
		}
	}
}

// play applies f to the FSM and, if it's valid and has an effect, to the
// directory.
func (p *Player) play(ctx context.Context, f *frame) error {
	var effect, err = p.fsm.Apply(f.op, f.opBytes, f.begin, f.end)
	if errors.Is(err, ErrNotFollowing) {
		playedOps.WithLabelValues("skipped").Inc()
		slog.Debug("skipping op of a dead branch, or a copy of an op already played", "journal", p.journal, "offset", f.begin,
			"seq", f.op.Seq, "author", Author(f.op.Author), "wantSeq", p.fsm.NextSeq())
		return nil
	} else if err != nil {
		return err
	} else if !effect {
		playedOps.WithLabelValues("unneeded").Inc()
		return nil
	}
	playedOps.WithLabelValues("played").Inc()
	playedBytes.Add(float64(f.end - f.begin))

	switch k := f.op.Kind.(type) {
	case *Op_Create:
		var file, err = p.createFile(k.Create.Path)
		if err != nil {
			return err
		}
		p.files[Fnode(f.op.Seq)] = file
	case *Op_Rebase:
		var fn = Fnode(k.Rebase.Fnode)
		if p.files[fn] != nil {
			return nil // The node is rebuilt already: its content is re-written in place.
		}
		// Hints begin the node here.
		var links = p.fsm.Links(fn)
		var file, err = p.createFile(links[0])
		if err != nil {
			return err
		}
		p.files[fn] = file
		return p.linkAt(fn, file, links[1:])
	case *Op_Adopt:
		return p.adopt(ctx, Fnode(f.op.Seq), k.Adopt.Source)
	case *Op_Write:
		var file, err = p.file(Fnode(k.Write.Fnode), "")
		if err != nil {
			return err
		} else if _, err = file.WriteAt(f.data, k.Write.Offset); err != nil {
			return fmt.Errorf("writing node %d: %w", k.Write.Fnode, err)
		}
		p.behind.wrote(Fnode(k.Write.Fnode), file, len(f.data))
		recoveredBytes().Add(float64(len(f.data)))
	case *Op_Link:
		var target = p.localPath(k.Link.Path)
		var file *os.File
		if file, err = p.file(Fnode(k.Link.Fnode), k.Link.Path); err == nil {
			err = os.MkdirAll(filepath.Dir(target), 0o755)
		}
		if err == nil {
			err = os.Link(file.Name(), target)
		}
		if err != nil {
			return fmt.Errorf("linking node %d: %w", k.Link.Fnode, err)
		}
	case *Op_Unlink:
		var fn = Fnode(k.Unlink.Fnode)
		if err = os.Remove(p.localPath(k.Unlink.Path)); err != nil {
			return fmt.Errorf("unlinking node %d: %w", fn, err)
		}
		var open = p.files[fn] // Nil if closed since: opened again by a link left, if needed.
		if links := p.fsm.Links(fn); len(links) == 0 && open != nil {
			err = open.Close()
			delete(p.files, fn)
			p.behind.forget(fn)
		} else if len(links) != 0 && open != nil && open.Name() == p.localPath(k.Unlink.Path) {
			// Keep the file's name one of its links, for later Link ops.
			var file *os.File
			if file, err = os.OpenFile(p.localPath(links[0]), os.O_RDWR, 0); err == nil {
				err = p.files[fn].Close()
				p.files[fn] = file
			}
		}
		if err != nil {
			return fmt.Errorf("unlinking node %d: %w", fn, err)
		}
	case *Op_Property:
		if k.Property.Remove {
			if err = os.Remove(p.localPath(k.Property.Path)); err != nil {
				return fmt.Errorf("removing property: %w", err)
			}
		} else {
			return p.writeProperty(k.Property.Path, k.Property.Content)
		}
	}
	return nil
}

// adopt builds the file of node fn, which adopts src: it plays src's log's
// segments of src's node into a directory beside the player's, then moves
// the file into the player's directory, at fn's links.
func (p *Player) adopt(ctx context.Context, fn Fnode, src *Source) error {
	var tmp, err = os.MkdirTemp(filepath.Dir(p.dir), p.scratchPrefix())
	if err != nil {
		return fmt.Errorf("node %d adopts node %d of %s: %w", fn, src.Node.Fnode, src.Log, err)
	}
	defer func() {
		if err := os.RemoveAll(tmp); err != nil {
			slog.Warn("removing the directory of an adopted file", "dir", tmp, "err", err)
		}
	}()
	var sub = NewPlayer(p.jc, pb.Journal(src.Log), tmp, p.author)
	sub.DoNotProxy, sub.FileRoot = p.direct, p.FileRoot
	var h = sourceHints(src)
	err = sub.PlayTo(ctx, h, h.NextOffset)
	p.bytesRead.Add(sub.BytesRead())
	if err != nil {
		return fmt.Errorf("node %d adopts node %d of %s: %w", fn, src.Node.Fnode, src.Log, err)
	}
	var links = p.fsm.Links(fn)
	var target = p.localPath(links[0])
	if err = os.MkdirAll(filepath.Dir(target), 0o755); err == nil {
		err = os.Rename(sub.localPath(src.Node.Links[0]), target)
	}
	var file *os.File
	if err == nil {
		file, err = os.OpenFile(target, os.O_RDWR, 0)
	}
	if err != nil {
		return fmt.Errorf("node %d adopts node %d of %s: %w", fn, src.Node.Fnode, src.Log, err)
	}
	p.files[fn] = file
	return p.linkAt(fn, file, links[1:])
}

// scratchPrefix is the prefix of the names of the directories, beside the
// player's, in which it adopts files (see adopt).
func (p *Player) scratchPrefix() string { return "." + filepath.Base(p.dir) + ".adopt-" }

// removeScratch removes the directories in which an earlier player of the
// same directory adopted files, if it ended before it removed them.
func (p *Player) removeScratch() {
	var parent = filepath.Dir(p.dir)
	var entries, err = os.ReadDir(parent)
	if err != nil {
		return // Play fails on the directory, naming it.
	}
	for _, e := range entries {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), p.scratchPrefix()) {
			continue
		}
		var dir = filepath.Join(parent, e.Name())
		if err = os.RemoveAll(dir); err != nil {
			slog.Warn("removing a directory left by an earlier player's adoption", "dir", dir, "err", err)
		} else {
			slog.Info("removed a directory left by an earlier player's adoption", "dir", dir)
		}
	}
}

// linkAt links file, of node fn, at each of links.
func (p *Player) linkAt(fn Fnode, file *os.File, links []string) error {
	for _, l := range links {
		var target = p.localPath(l)
		var err = os.MkdirAll(filepath.Dir(target), 0o755)
		if err == nil {
			err = os.Link(file.Name(), target)
		}
		if err != nil {
			return fmt.Errorf("linking node %d: %w", fn, err)
		}
	}
	return nil
}

// sourceHints returns hints of src's log which hold only src's node, and
// end where its last segment does: a player of them plays only its content.
func sourceHints(src *Source) *Hints {
	var h = &Hints{Log: src.Log, LiveNodes: []*LiveNode{src.Node}}
	for _, s := range src.Node.Segments {
		if s.LastSeq >= h.NextSeq {
			h.NextSeq, h.Author = s.LastSeq+1, s.Author
		}
		h.NextOffset = max(h.NextOffset, s.EndOffset)
	}
	return h
}

func (p *Player) localPath(name string) string { return filepath.Join(p.dir, filepath.FromSlash(name)) }

func (p *Player) createFile(name string) (*os.File, error) {
	var target = p.localPath(name)
	if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
		return nil, err
	}
	var file, err = os.OpenFile(target, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, fmt.Errorf("creating file: %w", err)
	}
	return file, nil
}

func (p *Player) writeProperty(name string, content []byte) error {
	var target = p.localPath(name)
	if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
		return err
	} else if err = os.WriteFile(target, content, 0o644); err != nil {
		return fmt.Errorf("writing property: %w", err)
	}
	return nil
}

func (p *Player) closeFiles() {
	p.behind.stop()
	for fn, file := range p.files {
		if err := file.Close(); err != nil {
			slog.Warn("closing played file", "journal", p.journal, "file", file.Name(), "err", err)
		}
		delete(p.files, fn)
	}
}
