package recoverylog

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"sync"

	"go.gazette.dev/core/broker/client"
	pb "go.gazette.dev/core/broker/protocol"
)

// Recorder records the file operations of a store's directory into its
// recovery log. Its methods are safe for concurrent use, as RocksDB calls
// them from many threads. Ops are appended asynchronously: Sync, Barrier and
// Hints wait for them to commit, and an append's failure is returned by the
// call which waits for it and by every later call.
//
// Ops are gathered in memory and handed to the journal client in batches of
// up to FlushBytes, or sooner by Sync, Barrier and Hints, so that a commit
// of a store costs one round trip to the brokers rather than one per write
// of its write-ahead log.
//
// Every append checks the log's AuthorRegister, so once another Player fences
// the log, the broker rejects this Recorder's appends and it fails with an
// error wrapping client.ErrRegisterMismatch.
type Recorder struct {
	journal pb.Journal
	dir     string
	author  Author
	ajc     client.AsyncJournalClient
	req     pb.AppendRequest

	mu     sync.Mutex
	fsm    *FSM
	open   map[Fnode]bool                // Handles returned by NewWritableFile and not yet closed.
	buf    []byte                        // Frames not yet handed to the journal client.
	offset int64                         // Log offset of the next op.
	last   *client.AsyncAppend           // Append of the last op.
	ends   map[*client.AsyncAppend]int64 // Log offset each append must commit through.
	err    error                         // Sticky failure.
}

// NewRecorder returns a Recorder which continues the log's history from fsm,
// as returned by a Player which fenced journal for author. Paths given to its
// methods are within dir (absolute) or relative to it.
func NewRecorder(journal pb.Journal, fsm *FSM, author Author, dir string, ajc client.AsyncJournalClient) (*Recorder, error) {
	if fsm.Author() != author {
		return nil, fmt.Errorf("recording %s: the log's author is %s, not %s (play and fence it first)", journal, fsm.Author(), author)
	}
	return &Recorder{
		journal: journal,
		dir:     filepath.Clean(dir),
		author:  author,
		ajc:     ajc,
		req:     pb.AppendRequest{Journal: journal, CheckRegisters: checkAuthor(author)},
		fsm:     fsm,
		open:    make(map[Fnode]bool),
		offset:  fsm.NextOffset(),
		ends:    make(map[*client.AsyncAppend]int64),
	}, nil
}

// Journal is the recovery log.
func (r *Recorder) Journal() pb.Journal { return r.journal }

// Dir is the local directory whose files the recorder records.
func (r *Recorder) Dir() string { return r.dir }

// Author of the recorder's ops.
func (r *Recorder) Author() Author { return r.author }

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

// record frames op (and data), applies it to the FSM, and appends it.
// r.mu must be held.
func (r *Recorder) record(op *Op, data []byte) error {
	if r.err != nil {
		return r.err
	}
	op.Seq, op.Checksum, op.Author = r.fsm.NextSeq(), r.fsm.NextChecksum(), uint32(r.author)

	var buf, opBytes, err = appendFrame(r.buf, op, data)
	if err != nil {
		return err
	}
	var begin, end = r.offset, r.offset + int64(len(buf)-len(r.buf))
	if _, err = r.fsm.Apply(op, opBytes, begin, end); err != nil {
		return fmt.Errorf("recording %s: %w", r.journal, err)
	}
	r.buf, r.offset = buf, end
	if len(r.buf) >= FlushBytes {
		return r.flushLocked(nil)
	}
	return nil
}

// FlushBytes is the size of gathered ops at which a Recorder hands them to
// the journal client without waiting for a Sync or Barrier.
const FlushBytes = 1 << 20

// flushLocked hands the gathered ops to the journal client, in an append
// which also waits for waitFor. It starts no append when there's nothing to
// flush and nothing to wait for. r.mu must be held.
func (r *Recorder) flushLocked(waitFor client.OpFutures) error {
	if r.err != nil {
		return r.err
	} else if len(r.buf) == 0 && len(waitFor) == 0 {
		return nil
	}
	var begin = r.offset - int64(len(r.buf))
	var aa = r.ajc.StartAppend(r.req, waitFor)
	var _, err = aa.Writer().Write(r.buf)
	if err = aa.Require(err).Release(); err != nil {
		r.err = fmt.Errorf("recording %s offset %d: %w", r.journal, begin, err)
		return r.err
	}
	recordedBytes.Add(float64(len(r.buf)))
	if cap(r.buf) > 2*FlushBytes {
		r.buf = nil // Don't pin the buffer of an unusually large op.
	} else {
		r.buf = r.buf[:0]
	}
	if aa != r.last && len(r.ends) > 64 {
		r.pruneEnds() // Bound the map, should no one await appends for a while.
	}
	r.last, r.ends[aa] = aa, r.offset
	return nil
}

// await waits for aa to commit, and checks that it committed through the
// offset the recorder expects: otherwise, another writer appended to the log.
func (r *Recorder) await(ctx context.Context, aa *client.AsyncAppend) error {
	if aa == nil {
		return nil
	}
	select {
	case <-aa.Done():
	case <-ctx.Done():
		return ctx.Err()
	}
	r.mu.Lock()
	defer r.mu.Unlock()

	// An entry pruned already was checked by its await, or is covered by the
	// check of a later append: offsets accumulate.
	var want, ok = r.ends[aa]
	r.pruneEnds()
	var err = aa.Err()
	if err == nil && ok && aa.Response().Commit != nil && aa.Response().Commit.End != want {
		err = fmt.Errorf("%w: log was appended to by another writer: commit ends at %d, not %d",
			ErrCorrupt, aa.Response().Commit.End, want)
	}
	if err != nil && r.err == nil {
		r.err = fmt.Errorf("recording %s: %w", r.journal, err)
	}
	return r.err
}

// pruneEnds forgets the expected ends of completed appends but the last.
// r.mu must be held.
func (r *Recorder) pruneEnds() {
	for aa := range r.ends {
		select {
		case <-aa.Done():
			if aa != r.last {
				delete(r.ends, aa)
			}
		default:
		}
	}
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
		if err := r.record(op, data[:n]); err != nil {
			return err
		}
		data, offset = data[n:], offset+int64(n)
	}
	return nil
}

// Sync waits until every op recorded so far, file fn's included, is
// committed to the log.
func (r *Recorder) Sync(fn Fnode) error { return r.SyncAll(context.Background()) }

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
	var h, aa = r.fsm.Hints(r.journal.String()), r.last
	r.mu.Unlock()
	if err != nil {
		return nil, err
	} else if err = r.await(ctx, aa); err != nil {
		return nil, err
	}
	return h, nil
}
