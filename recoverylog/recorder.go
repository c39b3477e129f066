package recoverylog

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"go.gazette.dev/core/broker/client"
	pb "go.gazette.dev/core/broker/protocol"
)

// Recorder records the file operations of a store's directory into its
// recovery log. Its methods are safe for concurrent use, as RocksDB calls
// them from many threads. Ops are appended asynchronously: SyncAll, Barrier
// and Hints wait for them to commit, and an append's failure is returned by
// the call which waits for it and by every later call.
//
// Ops are gathered in memory and handed to the journal client in batches of
// up to FlushBytes, or sooner by Sync, Barrier and Hints, so that a commit
// of a store costs one round trip to the brokers rather than one per write
// of its write-ahead log. A write of directWriteLen bytes or more (as of a
// flush or a compaction) is handed over with the ops gathered before it,
// from the caller's buffer, rather than copied among them.
//
// Every append checks the log's AuthorRegister, so once another Player fences
// the log, the broker rejects this Recorder's appends and it fails with an
// error wrapping client.ErrRegisterMismatch.
//
// Ops are framed with the log offsets at which the Recorder expects them to
// commit, and it checks each append's commit against them, in order. Should
// an append commit elsewhere, the log holds bytes which the Recorder didn't
// expect. If they are a copy of its own append (a broker committed the
// append, its acknowledgement was lost, and the journal client appended it
// again), players skip the copy, as its ops repeat seqs already played: the
// Recorder then moves the offsets of its later ops and of its live segments
// past the copy, logs a warning, and records on. Any other bytes are another
// writer's, which invalidate its offsets: it fails with an error wrapping
// ErrCorrupt.
type Recorder struct {
	journal pb.Journal
	dir     string
	author  Author
	ajc     client.AsyncJournalClient
	req     pb.AppendRequest

	// checking is a semaphore held by the one goroutine which checks
	// commits of appends, which may read the log with mu released. It is
	// acquired before mu.
	checking chan struct{}

	mu      sync.Mutex
	fsm     *FSM
	open    map[Fnode]bool      // Handles returned by NewWritableFile and not yet closed.
	buf     []byte              // Frames not yet handed to the journal client.
	offset  int64               // Log offset of the next op.
	last    *client.AsyncAppend // Append of the last op.
	pending []pendingAppend     // Appends whose commits are not yet checked, in log order.
	checked logRange            // Where the last checked non-empty append committed.
	shifts  []offsetShift       // Copies of appends found in the log, in order.
	err     error               // Sticky failure.
}

// pendingAppend is an append handed to the journal client, and the log
// offsets at which the recorder expects it to commit.
type pendingAppend struct {
	aa   *client.AsyncAppend
	span logRange
}

// logRange is the log's bytes [begin, end).
type logRange struct{ begin, end int64 }

func (r logRange) len() int64 { return r.end - r.begin }

// offsetShift tells that the log holds by bytes, of which the recorder
// didn't know when it framed its ops, at offset at: the ops it framed at or
// after at are by bytes further.
type offsetShift struct{ at, by int64 }

// NewRecorder returns a Recorder which continues the log's history from fsm,
// as returned by a Player which fenced journal for author. Paths given to its
// methods are within dir (absolute) or relative to it.
func NewRecorder(journal pb.Journal, fsm *FSM, author Author, dir string, ajc client.AsyncJournalClient) (*Recorder, error) {
	if fsm.Author() != author {
		return nil, fmt.Errorf("recording %s: the log's author is %s, not %s (play and fence it first)", journal, fsm.Author(), author)
	}
	return &Recorder{
		journal:  journal,
		dir:      filepath.Clean(dir),
		author:   author,
		ajc:      ajc,
		req:      pb.AppendRequest{Journal: journal, CheckRegisters: checkAuthor(author)},
		checking: make(chan struct{}, 1),
		fsm:      fsm,
		open:     make(map[Fnode]bool),
		offset:   fsm.NextOffset(),
	}, nil
}

// Journal is the recovery log.
func (r *Recorder) Journal() pb.Journal { return r.journal }

// Dir is the local directory whose files the recorder records.
func (r *Recorder) Dir() string { return r.dir }

// Author of the recorder's ops.
func (r *Recorder) Author() Author { return r.author }

// Stats are those of Hints of the log through the ops recorded so far
// (StatsOf), which a player would read once they commit, and which Hints
// would return once they do.
func (r *Recorder) Stats() Stats {
	r.mu.Lock()
	defer r.mu.Unlock()
	return StatsOf(r.fsm.Hints(r.journal.String()))
}

// Err returns the recorder's failure, if any.
func (r *Recorder) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

// rel maps name to a path relative to the recorder's directory.
func (r *Recorder) rel(name string) (string, error) {
	var p = filepath.Clean(name)
	if filepath.IsAbs(p) {
		var rel, err = filepath.Rel(r.dir, p)
		if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			return "", fmt.Errorf("recording %s: path %s is not within %s", r.journal, name, r.dir)
		}
		p = rel
	}
	p = filepath.ToSlash(p)
	if !validPath(p) {
		return "", fmt.Errorf("recording %s: invalid path %q", r.journal, name)
	}
	return p, nil
}

// record frames op (and data) into r.buf, and applies it to the FSM.
// r.mu must be held.
func (r *Recorder) record(op *Op, data []byte) error {
	return r.recordFrame(op, data, 0)
}

// recordFrame frames op into r.buf, followed by data, or by nothing where
// the next tail bytes handed to the journal client are op's data (its
// frame then ends tail bytes past r.buf), and applies op to the FSM. r.mu
// must be held.
func (r *Recorder) recordFrame(op *Op, data []byte, tail int) error {
	if r.err != nil {
		return r.err
	}
	op.Seq, op.Checksum, op.Author = r.fsm.NextSeq(), r.fsm.NextChecksum(), uint32(r.author)

	var buf, opBytes, err = appendFrame(r.buf, op, data)
	if err != nil {
		return err
	}
	var begin, end = r.offset, r.offset + int64(len(buf)-len(r.buf)+tail)
	if _, err = r.fsm.Apply(op, opBytes, begin, end); err != nil {
		return fmt.Errorf("recording %s: %w", r.journal, err)
	}
	r.buf, r.offset = buf, end
	return nil
}

// FlushBytes is the size of gathered ops at which a Recorder hands them to
// the journal client without waiting for a Sync or Barrier: as it records a
// write, between its Write ops. The ops of any other call, such as the
// Unlink and Links of a Rename, go to the journal client in one append, so
// that the log holds all of them or none.
const FlushBytes = 1 << 20

// directWriteLen is the length of a write's data from which a Recorder
// hands it to the journal client as it is, after the frames gathered before
// it and its own op, rather than copying it among them (which costs a copy,
// and the growth of the Recorder's buffer, for each of the large writes of
// a store's flushes and compactions).
const directWriteLen = 64 << 10

// flushLocked hands the gathered ops to the journal client, in an append
// which also waits for waitFor. It starts no append when there's nothing to
// flush and nothing to wait for. r.mu must be held.
func (r *Recorder) flushLocked(waitFor client.OpFutures) error {
	return r.flushTailLocked(waitFor, nil)
}

// flushTailLocked is flushLocked, handing tail to the journal client after
// the gathered ops: the data of the last op, recorded by recordFrame with
// len(tail). r.mu must be held.
func (r *Recorder) flushTailLocked(waitFor client.OpFutures, tail []byte) error {
	if r.err != nil {
		return r.err
	} else if len(r.buf) == 0 && len(tail) == 0 && len(waitFor) == 0 {
		return nil
	}
	var begin = r.offset - int64(len(r.buf)+len(tail))
	var aa = r.ajc.StartAppend(r.req, waitFor)
	var w = aa.Writer()
	var _, err = w.Write(r.buf)
	if err == nil && len(tail) != 0 {
		_, err = w.Write(tail)
	}
	if err = aa.Require(err).Release(); err != nil {
		r.err = fmt.Errorf("recording %s offset %d: %w", r.journal, begin, err)
		return r.err
	}
	recordedBytes.Add(float64(len(r.buf) + len(tail)))
	if cap(r.buf) > 2*FlushBytes {
		r.buf = nil // Don't pin the buffer of an unusually large op.
	} else {
		r.buf = r.buf[:0]
	}
	if l := len(r.pending); l != 0 && r.pending[l-1].aa == aa {
		r.pending[l-1].span.end = r.offset // Batched with the previous flush, in one RPC.
	} else {
		r.pending = append(r.pending, pendingAppend{aa: aa, span: logRange{begin, r.offset}})
	}
	r.last = aa
	// Drop the appends which committed meanwhile where expected, so that
	// pending stays short should no one await appends for a while.
	for len(r.pending) != 0 && committedAsExpected(r.pending[0]) {
		r.checkedLocked(r.pending[0].span)
	}
	return nil
}

// committedAsExpected reports whether p is done, and committed without
// error at the offsets the recorder expects.
func committedAsExpected(p pendingAppend) bool {
	if !isDone(p.aa) || p.aa.Err() != nil {
		return false
	}
	var commit = p.aa.Response().Commit
	return commit == nil || commit.Begin == p.span.begin && commit.End == p.span.end
}

func isDone(aa *client.AsyncAppend) bool {
	select {
	case <-aa.Done():
		return true
	default:
		return false
	}
}

// await waits for aa to commit, and checks the commits of the appends
// through it, in order: each must be where the recorder expects it, or
// follow a copy of the recorder's own append.
func (r *Recorder) await(ctx context.Context, aa *client.AsyncAppend) error {
	if aa == nil {
		return nil
	}
	select {
	case <-aa.Done():
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case r.checking <- struct{}{}:
		defer func() { <-r.checking }()
	case <-ctx.Done():
		return ctx.Err()
	}
	r.mu.Lock()
	defer r.mu.Unlock()

	// Appends complete in order: those before aa are done too. Once aa is
	// checked, or if it was checked already, only later appends remain.
	for r.err == nil && len(r.pending) != 0 && isDone(r.pending[0].aa) {
		var p = r.pending[0]
		if err := r.checkLocked(ctx, p); err != nil {
			return err // The context's error: p remains to be checked.
		} else if p.aa == aa {
			break
		}
	}
	return r.err
}

// checkLocked checks the commit of p, the first pending append, which is
// done, and removes it from pending. An append which failed, or committed
// where the recorder did not expect it other than just after copies of its
// own append, sets the recorder's sticky error. To recognize such copies, it
// reads the log with r.mu released (r.checking must be held). It returns
// ctx's error, leaving p pending, if ctx ends first. r.mu must be held.
func (r *Recorder) checkLocked(ctx context.Context, p pendingAppend) error {
	if err := p.aa.Err(); err != nil {
		r.failLocked(fmt.Errorf("offset %d: %w", p.span.begin, err))
		return nil
	} else if committedAsExpected(p) {
		r.checkedLocked(p.span)
		return nil
	}
	var commit = p.aa.Response().Commit
	var got, prev = logRange{commit.Begin, commit.End}, r.checked
	r.mu.Unlock()
	var shift, copies, err = r.recognizeCopies(ctx, p.span, got, prev)
	r.mu.Lock()

	if err != nil && ctx.Err() != nil {
		return ctx.Err()
	} else if err != nil {
		r.failLocked(err)
		return nil
	}
	slog.Warn("recovery log: an append of the recorder is in the log more than once (its acknowledgement was lost, and it was appended again); players skip the copies",
		"journal", r.journal, "expectedBegin", p.span.begin, "commitBegin", got.begin, "commitEnd", got.end,
		"copiesBegin", shift.at, "copiesEnd", shift.at+shift.by,
		"copiesOfPreviousAppend", copies.ofPrevious, "copiesOfThisAppend", copies.ofItself)
	duplicatedBytes.Add(float64(shift.by))
	r.shiftLocked(shift)
	r.checkedLocked(got)
	return nil
}

// checkedLocked removes the first pending append, which committed at span.
// r.mu must be held.
func (r *Recorder) checkedLocked(span logRange) {
	r.pending[0] = pendingAppend{}
	r.pending = r.pending[1:]
	if span.len() != 0 {
		r.checked = span
	}
}

// failLocked sets the recorder's sticky error, if it has none.
// r.mu must be held.
func (r *Recorder) failLocked(err error) {
	if r.err == nil {
		r.err = fmt.Errorf("recording %s: %w", r.journal, err)
	}
}

// recognizeCopies tells whether an append which the recorder expected at
// want, but which committed at got, follows copies of the recorder's own
// appends, and returns where the copies lie and how many there are. The
// copies must fill the log from want on: first any of prev, the append which
// committed just before want (appended again after it committed), then any
// of this append (which the broker committed, and committed again when the
// journal client retried it after losing the acknowledgement). It reads the
// log to check that they hold the same bytes. Otherwise, another writer
// appended to the log, and it returns an error wrapping ErrCorrupt.
func (r *Recorder) recognizeCopies(ctx context.Context, want, got, prev logRange) (offsetShift, copyCounts, error) {
	var gap = got.begin - want.begin
	var foreign = func(why string) error {
		return fmt.Errorf("%w: log was appended to by another writer: the append expected at [%d, %d) committed at [%d, %d): %s",
			ErrCorrupt, want.begin, want.end, got.begin, got.end, why)
	}
	if got.len() != want.len() {
		return offsetShift{}, copyCounts{}, foreign("of another length")
	} else if gap < 0 {
		return offsetShift{}, copyCounts{}, foreign("before the end of the recorder's appends")
	}
	var n copyCounts
	var at = want.begin // Where the copies checked so far end.
	if prev.len() != 0 && prev.end == want.begin {
		for at+prev.len() <= got.begin {
			if same, err := r.sameBytes(ctx, at-prev.len(), at, prev.len()); err != nil {
				return offsetShift{}, copyCounts{}, err
			} else if !same {
				break
			}
			at += prev.len()
			n.ofPrevious++
		}
	}
	// The rest must be copies of this append, if the log from at on repeats
	// with the append's length as period through its commit.
	if rest := got.begin - at; rest != 0 {
		if want.len() == 0 || rest%want.len() != 0 {
			return offsetShift{}, copyCounts{}, foreign(fmt.Sprintf("%d bytes at %d are no copies of the recorder's appends", rest, at))
		} else if same, err := r.sameBytes(ctx, at, at+want.len(), rest); err != nil {
			return offsetShift{}, copyCounts{}, err
		} else if !same {
			return offsetShift{}, copyCounts{}, foreign(fmt.Sprintf("%d bytes at %d differ from the recorder's appends", rest, at))
		}
		n.ofItself = int(rest / want.len())
	}
	return offsetShift{at: want.begin, by: gap}, n, nil
}

// copyCounts counts the copies of appends which recognizeCopies found.
type copyCounts struct {
	ofPrevious int // Of the append before.
	ofItself   int // Of the append which committed after them.
}

// sameBytes reports whether the log's n bytes at a and at b are the same.
func (r *Recorder) sameBytes(ctx context.Context, a, b, n int64) (_ bool, err error) {
	defer func() {
		if err != nil {
			err = fmt.Errorf("reading the log to compare its %d bytes at %d and at %d: %w", n, a, b, err)
		}
	}()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var open = func(offset int64) io.Reader {
		return client.NewRetryReader(ctx, r.ajc, pb.ReadRequest{Journal: r.journal, Offset: offset, EndOffset: offset + n})
	}
	var ra, rb = open(a), open(b)
	var ba, bb = make([]byte, min(n, 64<<10)), make([]byte, min(n, 64<<10))
	for off := int64(0); off < n; {
		var k = min(int64(len(ba)), n-off)
		if _, err := io.ReadFull(ra, ba[:k]); err != nil {
			return false, fmt.Errorf("offset %d: %w", a+off, err)
		} else if _, err = io.ReadFull(rb, bb[:k]); err != nil {
			return false, fmt.Errorf("offset %d: %w", b+off, err)
		} else if !bytes.Equal(ba[:k], bb[:k]) {
			return false, nil
		}
		off += k
	}
	return true, nil
}

// shiftLocked moves the offsets of the recorder's ops, of its live
// segments, and of its pending appends, past bytes the log holds at s.at.
// r.mu must be held.
func (r *Recorder) shiftLocked(s offsetShift) {
	r.fsm.shiftOffsets(s)
	r.offset = s.begin(r.offset)
	for i := range r.pending {
		// Pending appends all begin at or after the copies, and move whole.
		if r.pending[i].span.begin >= s.at {
			r.pending[i].span.begin += s.by
			r.pending[i].span.end += s.by
		}
	}
	r.shifts = append(r.shifts, s)
}

// begin returns where an op, or a range of the log, framed at offset x lies.
func (s offsetShift) begin(x int64) int64 {
	if x >= s.at {
		return x + s.by
	}
	return x
}

// end returns where a non-empty range of the log framed to end at x ends.
func (s offsetShift) end(x int64) int64 {
	if x > s.at {
		return x + s.by
	}
	return x
}

// NewWritableFile records the creation of an empty file at name, replacing
// any file there, and returns its handle.
func (r *Recorder) NewWritableFile(name string) (Fnode, error) {
	var p, err = r.rel(name)
	if err != nil {
		return 0, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()

	if err = r.removeLocked(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return 0, err
	}
	var fn = Fnode(r.fsm.NextSeq())
	if err = r.record(&Op{Kind: &Op_Create{Create: &Create{Path: p}}}, nil); err != nil {
		return 0, err
	}
	r.open[fn] = true
	return fn, nil
}

// Append records data appended to the end of file fn.
func (r *Recorder) Append(fn Fnode, data []byte) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	var size, _ = r.fsm.Size(fn)
	return r.writeLocked(fn, data, size)
}

// PositionedAppend records data written at offset of file fn.
func (r *Recorder) PositionedAppend(fn Fnode, data []byte, offset int64) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.writeLocked(fn, data, offset)
}

func (r *Recorder) writeLocked(fn Fnode, data []byte, offset int64) error {
	if !r.open[fn] {
		return fmt.Errorf("recording %s: file handle %d is not open", r.journal, fn)
	} else if _, live := r.fsm.Size(fn); !live {
		return r.err // Deleted while open: its content no longer matters.
	}
	if r.err != nil {
		return r.err
	}
	return r.recordWrites(fn, data, offset)
}

// recordWrites records data written at offset of live node fn, as Write ops
// of at most MaxWriteLen bytes. r.mu must be held.
func (r *Recorder) recordWrites(fn Fnode, data []byte, offset int64) error {
	for len(data) != 0 {
		var n = min(len(data), MaxWriteLen)
		var op = &Op{Kind: &Op_Write{Write: &Write{
			Fnode:      uint64(fn),
			Offset:     offset,
			Length:     int64(n),
			DataCrc32C: crc32Of(data[:n]),
		}}}
		// A log which ends within a write holds a prefix of it, as a
		// file system which fails within one might: it needn't be whole.
		if n >= directWriteLen {
			if err := r.recordFrame(op, nil, n); err != nil {
				return err
			} else if err = r.flushTailLocked(nil, data[:n]); err != nil {
				return err
			}
		} else if err := r.record(op, data[:n]); err != nil {
			return err
		} else if len(r.buf) >= FlushBytes {
			if err := r.flushLocked(nil); err != nil {
				return err
			}
		}
		data, offset = data[n:], offset+int64(n)
	}
	return nil
}

// Sync hands every op recorded so far, file fn's included, to the journal
// client, without waiting for them to commit. That's all a sync of a
// recorded file needs: a log holds an op only if it holds every op before
// it, so no later op of the store (a manifest naming the file, a removal
// of what the file replaces) outlives the file's writes, whenever the log
// ends. A store's commits wait for theirs to commit (Barrier): a sync that
// waited too would only hold the store's flushes and compactions up for a
// round trip to the brokers, behind its commits' appends.
func (r *Recorder) Sync(fn Fnode) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.flushLocked(nil)
}

// SyncAll waits until every op recorded so far is committed to the log.
func (r *Recorder) SyncAll(ctx context.Context) error {
	r.mu.Lock()
	var err = r.flushLocked(nil)
	var aa = r.last
	r.mu.Unlock()
	if err != nil {
		return err
	}
	return r.await(ctx, aa)
}

// Close releases handle fn. It records nothing: the file remains.
func (r *Recorder) Close(fn Fnode) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.open, fn)
	return r.err
}

// Rename records the move of file src to dst, replacing any file at dst.
func (r *Recorder) Rename(src, dst string) error {
	var s, err = r.rel(src)
	if err != nil {
		return err
	}
	d, err := r.rel(dst)
	if err != nil {
		return err
	} else if s == d {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()

	if content, ok := r.fsm.Property(s); ok {
		if err = r.setPropertyLocked(d, content); err == nil {
			err = r.record(&Op{Kind: &Op_Property{Property: &Property{Path: s, Remove: true}}}, nil)
		}
		return err
	}
	var fn, ok = r.fsm.Lookup(s)
	if !ok {
		return fmt.Errorf("recording %s: rename of %s: %w", r.journal, s, fs.ErrNotExist)
	}
	if err = r.removeLocked(d); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err = r.record(&Op{Kind: &Op_Link{Link: &Link{Fnode: uint64(fn), Path: d}}}, nil); err != nil {
		return err
	}
	return r.record(&Op{Kind: &Op_Unlink{Unlink: &Unlink{Fnode: uint64(fn), Path: s}}}, nil)
}

// Link records dst as a new name of file src. Dst must not exist.
func (r *Recorder) Link(src, dst string) error {
	var s, err = r.rel(src)
	if err != nil {
		return err
	}
	d, err := r.rel(dst)
	if err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()

	var fn, ok = r.fsm.Lookup(s)
	if !ok {
		return fmt.Errorf("recording %s: link of %s: %w", r.journal, s, fs.ErrNotExist)
	}
	return r.record(&Op{Kind: &Op_Link{Link: &Link{Fnode: uint64(fn), Path: d}}}, nil)
}

// Adopt records that the file at name, which must not be recorded yet, has
// the content of src, a node of another log: the file is, say, a link of
// that node's file in another store's directory. The log records no byte
// of it; a player reads them from src's log (see Adopt). The file's size
// must be the node's.
func (r *Recorder) Adopt(name string, src *Source) error {
	var p, err = r.rel(name)
	if err != nil {
		return err
	} else if err = validateSource(src); err != nil {
		return fmt.Errorf("recording %s: adopt of %s: %w", r.journal, p, err)
	} else if src.Log == r.journal.String() {
		return fmt.Errorf("recording %s: adopt of %s: node %d is of this log", r.journal, p, src.Node.Fnode)
	}
	if fi, err := os.Stat(filepath.Join(r.dir, filepath.FromSlash(p))); err != nil {
		return fmt.Errorf("recording %s: adopt: %w", r.journal, err)
	} else if fi.Size() != src.Node.Size {
		return fmt.Errorf("recording %s: adopt of %s, of %d bytes, as node %d of %s, of %d bytes", r.journal, p, fi.Size(), src.Node.Fnode, src.Log, src.Node.Size)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.record(&Op{Kind: &Op_Adopt{Adopt: &Adopt{Links: []string{p}, Source: src}}}, nil)
}

// Sources waits for every op recorded so far to commit, and returns the
// nodes linked at names, as sources another log may adopt (see Adopt).
// Their content must no longer change: another log adopts it as it is now.
func (r *Recorder) Sources(ctx context.Context, names ...string) ([]*Source, error) {
	var h, err = r.Hints(ctx)
	if err != nil {
		return nil, err
	}
	var byLink = make(map[string]*LiveNode)
	for _, ln := range h.LiveNodes {
		for _, l := range ln.Links {
			byLink[l] = ln
		}
	}
	var out = make([]*Source, len(names))
	for i, name := range names {
		var p, err = r.rel(name)
		if err != nil {
			return nil, err
		} else if out[i] = (&Source{Log: h.Log, Node: byLink[p]}); out[i].Node == nil {
			return nil, fmt.Errorf("recording %s: source %s: %w", r.journal, p, fs.ErrNotExist)
		}
	}
	return out, nil
}

// RemoveAll removes every file and property the recorder records, and
// records their removal, leaving its directory empty.
func (r *Recorder) RemoveAll() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	var names = slices.Collect(maps.Keys(r.fsm.links))
	names = slices.AppendSeq(names, maps.Keys(r.fsm.props))
	slices.Sort(names)
	for _, p := range names {
		if err := r.removeLocked(p); err != nil {
			return err
		}
	}
	var err = os.RemoveAll(r.dir)
	if err == nil {
		err = os.MkdirAll(r.dir, 0o750)
	}
	if err != nil {
		return fmt.Errorf("recording %s: emptying %s: %w", r.journal, r.dir, err)
	}
	return nil
}

// Delete records the removal of file name.
func (r *Recorder) Delete(name string) error {
	var p, err = r.rel(name)
	if err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.removeLocked(p)
}

// removeLocked records the removal of file or property p. It returns an
// error wrapping fs.ErrNotExist if there's none.
func (r *Recorder) removeLocked(p string) error {
	if fn, ok := r.fsm.Lookup(p); ok {
		return r.record(&Op{Kind: &Op_Unlink{Unlink: &Unlink{Fnode: uint64(fn), Path: p}}}, nil)
	} else if _, ok = r.fsm.Property(p); ok {
		return r.record(&Op{Kind: &Op_Property{Property: &Property{Path: p, Remove: true}}}, nil)
	}
	return fmt.Errorf("recording %s: removal of %s: %w", r.journal, p, fs.ErrNotExist)
}

// SetProperty records name as a small file of content, replacing any file
// there. Properties are kept whole in Hints.
func (r *Recorder) SetProperty(name string, content []byte) error {
	var p, err = r.rel(name)
	if err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.setPropertyLocked(p, content)
}

func (r *Recorder) setPropertyLocked(p string, content []byte) error {
	if fn, ok := r.fsm.Lookup(p); ok {
		if err := r.record(&Op{Kind: &Op_Unlink{Unlink: &Unlink{Fnode: uint64(fn), Path: p}}}, nil); err != nil {
			return err
		}
	}
	return r.record(&Op{Kind: &Op_Property{Property: &Property{Path: p, Content: content}}}, nil)
}

// Barrier returns an OpFuture which resolves once every op recorded so far
// is committed to the log, and after waitFor resolve. A transaction records
// its checkpoint, then acknowledges it only after its Barrier resolves.
func (r *Recorder) Barrier(waitFor client.OpFutures) client.OpFuture {
	r.mu.Lock()
	var err = r.flushLocked(waitFor)
	var aa = r.last
	r.mu.Unlock()

	if err != nil {
		return client.FinishedOperation(err)
	} else if aa == nil {
		return client.FinishedOperation(nil) // Nothing was ever recorded.
	}
	var op = client.NewAsyncOperation()
	go func() { op.Resolve(r.await(context.Background(), aa)) }()
	return op
}

// Hints waits for every op recorded so far to commit, and returns Hints of
// the log through them.
func (r *Recorder) Hints(ctx context.Context) (*Hints, error) {
	r.mu.Lock()
	var err = r.flushLocked(nil)
	var h, aa, shifts = r.fsm.Hints(r.journal.String()), r.last, len(r.shifts)
	r.mu.Unlock()
	if err != nil {
		return nil, err
	} else if err = r.await(ctx, aa); err != nil {
		return nil, err
	}
	// Copies of appends found meanwhile moved ops which h holds.
	r.mu.Lock()
	for _, s := range r.shifts[shifts:] {
		shiftHints(h, s)
	}
	r.mu.Unlock()
	return h, nil
}
