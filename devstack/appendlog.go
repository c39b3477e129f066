package devstack

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.gazette.dev/core/broker/client"
	pb "go.gazette.dev/core/broker/protocol"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// The brokers of a Stack all live in its process: when the process dies
// (SIGKILL, an out-of-memory kill, a crash), replication cannot save what
// they acknowledged but had not yet persisted to the fragment store, which
// Gazette persists only as fragments complete. So the stack keeps an
// append log: a broker acknowledges an append only once the append's
// content is in the log (and synced to disk, unless UnsafeNoFsync). The
// next Start, on the same directory, appends again whatever the fragment
// store lacks, at its very offsets, before anyone else may append.
//
// A broker logs an append once it has committed it, and acknowledges it
// once the record is logged, so the log may end in appends that were never
// acknowledged: the process died after logging them. The next Start
// appends those again too, as it does every logged append the fragment
// store lacks: it cannot tell them from the acknowledged ones. Their
// writers, which got no acknowledgement, may send them again, and the
// journal then holds their content twice. That is at-least-once, as an
// append to any Gazette broker is whose acknowledgement is lost: a
// recovery log's recorder recognizes copies of its own appends, and
// readers of messages drop duplicates by UUID. The stack never
// acknowledges an append it did not write: an append is written however
// its content matches an earlier one.
//
// The log is a sequence of segment files under Dir/appendlog. A segment
// whose every append the fragment store holds is removed; a clean Close
// removes them all.

// appendLogSegmentSize is the size past which the log starts a new segment.
const appendLogSegmentSize = 64 << 20

// appendRecordMagic begins each record.
var appendRecordMagic = [4]byte{'g', 'z', 'a', 'l'}

// appendRecord is a committed append, acknowledged once it is logged.
type appendRecord struct {
	Journal    pb.Journal
	Begin, End pb.Offset
	Content    []byte
}

// appendLog is the stack's log of committed appends (see above).
type appendLog struct {
	dir         string
	sync        bool
	segmentSize int64 // Past which a new segment starts.

	mu       sync.Mutex
	f        *os.File
	w        *bufio.Writer
	seq      int                  // Of the current segment.
	size     int64                // Of the current segment.
	ends     map[pb.Journal]int64 // Largest end of each journal in the current segment.
	closed   []closedSegment      // Earlier segments, not yet removed.
	written  uint64               // Records written.
	shut     bool                 // Closed: readers no longer wait.
	writeErr error                // Sticky: once writing failed, appends are refused.

	// logged is, of each journal, the end of the content written to the
	// log without a gap: a record beginning past it waits for the records
	// before it. durable is the end of the content so written and on disk
	// (synced, if the log syncs): reads wait for it, since content a broker
	// committed is readable before its append is acknowledged, and a
	// reader must not act on content a crash loses. A journal missing from
	// them has logged nothing this run (they are 0), unless it is
	// unguarded (its content could not be accounted for at start: reads
	// never wait).
	logged    map[pb.Journal]pb.Offset
	durable   map[pb.Journal]pb.Offset
	unguarded map[pb.Journal]bool
	changed   chan struct{} // Closed and replaced as logged or durable advance.
	// unsynced holds, in the order written, the records not yet known to
	// be on disk: each moves its journal's durable to its logged end.
	unsynced []unsyncedRecord

	// syncMu serializes syncs; it is taken before mu, never while mu is held.
	syncMu sync.Mutex
	synced atomic.Uint64 // Records known to be on disk; raised under mu.

	// fsync, if set, syncs a segment or the log's directory in place of
	// (*os.File).Sync (tests watch the syncs).
	fsync func(*os.File) error
}

// syncFile syncs f, a segment or the log's directory, to disk.
func (l *appendLog) syncFile(f *os.File) error {
	if l.fsync != nil {
		return l.fsync(f)
	}
	return f.Sync()
}

// unsyncedRecord is a record written but not yet known to be on disk: the
// seq-th written, it logged its journal through end.
type unsyncedRecord struct {
	seq     uint64
	journal pb.Journal
	end     pb.Offset
}

// raiseSyncedLocked notes that the first n records are on disk, and
// releases the readers of their content.
func (l *appendLog) raiseSyncedLocked(n uint64) {
	if n <= l.synced.Load() {
		return
	}
	l.synced.Store(n)
	var i int
	for ; i < len(l.unsynced) && l.unsynced[i].seq <= n; i++ {
		var r = l.unsynced[i]
		l.durable[r.journal] = max(l.durable[r.journal], r.end)
	}
	if i != 0 {
		l.unsynced = l.unsynced[i:]
		l.changedLocked()
	}
}

// changedLocked wakes those waiting on logged, durable or shut.
func (l *appendLog) changedLocked() {
	close(l.changed)
	l.changed = make(chan struct{})
}

// closedSegment is a segment no longer written, and the largest end of each
// journal it holds.
type closedSegment struct {
	path string
	ends map[pb.Journal]int64
}

// openAppendLog opens a new segment of the log in dir, after those there.
func openAppendLog(dir string, sync bool) (*appendLog, error) {
	var l = &appendLog{dir: dir, sync: sync, segmentSize: appendLogSegmentSize,
		logged: make(map[pb.Journal]pb.Offset), durable: make(map[pb.Journal]pb.Offset), unguarded: make(map[pb.Journal]bool), changed: make(chan struct{})}
	var _, statErr = os.Stat(dir)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("devstack: creating the append log: %w", err)
	}
	if errors.Is(statErr, os.ErrNotExist) && sync {
		// The log's directory is new: its entry, too, must survive a crash.
		if err := l.syncDir(filepath.Dir(dir)); err != nil {
			return nil, err
		}
	}
	var segs, err = appendLogSegments(dir)
	if err != nil {
		return nil, err
	}
	if len(segs) != 0 {
		l.seq = segs[len(segs)-1].seq
	}
	for _, s := range segs {
		// Segments of an earlier run: replay removes them once replayed.
		l.closed = append(l.closed, closedSegment{path: s.path})
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l, l.rotateLocked()
}

type segmentFile struct {
	path string
	seq  int
}

// appendLogSegments lists the segments of dir in order.
func appendLogSegments(dir string) ([]segmentFile, error) {
	var entries, err = os.ReadDir(dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("devstack: listing the append log: %w", err)
	}
	var out []segmentFile
	for _, e := range entries {
		var name, ok = strings.CutSuffix(e.Name(), ".log")
		if !ok {
			continue
		}
		var seq, err = strconv.Atoi(name)
		if err != nil {
			continue
		}
		out = append(out, segmentFile{path: filepath.Join(dir, e.Name()), seq: seq})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].seq < out[j].seq })
	return out, nil
}

// rotateLocked closes the current segment, if any, and starts the next.
func (l *appendLog) rotateLocked() error {
	if l.f != nil {
		if err := l.w.Flush(); err != nil {
			return err
		}
		if err := l.syncFile(l.f); err != nil {
			return err
		}
		if err := l.f.Close(); err != nil {
			return err
		}
		l.closed = append(l.closed, closedSegment{path: l.f.Name(), ends: l.ends})
		l.f, l.w = nil, nil
		l.raiseSyncedLocked(l.written)
	}
	l.seq++
	var f, err = os.OpenFile(filepath.Join(l.dir, fmt.Sprintf("%012d.log", l.seq)), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o640)
	if err != nil {
		return fmt.Errorf("devstack: creating an append log segment: %w", err)
	}
	if l.sync {
		// A synced record survives a crash of the machine only if the
		// segment's entry in the directory does too.
		if err = l.syncDir(l.dir); err != nil {
			_ = f.Close()
			return err
		}
	}
	l.f, l.w, l.size, l.ends = f, bufio.NewWriterSize(f, 1<<16), 0, make(map[pb.Journal]int64)
	return nil
}

// syncDir syncs the directory at path, so that the entries created in it
// survive a crash of the machine.
func (l *appendLog) syncDir(path string) error {
	var d, err = os.Open(path)
	if err != nil {
		return fmt.Errorf("devstack: syncing the append log's directory: %w", err)
	}
	defer d.Close()
	if err = l.syncFile(d); err != nil {
		return fmt.Errorf("devstack: syncing the append log's directory: %w", err)
	}
	return nil
}

// appendOrderTimeout bounds how long a record waits for the records of
// the content before it, which the broker committed first.
const appendOrderTimeout = 10 * time.Second

// record logs a committed append, to be acknowledged once record returns:
// once it is written, and synced if the log syncs (its content is then
// readable). Records of concurrent appends share a sync. Records of a
// journal are logged in offset order: one beginning past the journal's
// logged content waits, briefly, for the appends before it, whose
// acknowledgements the broker sends concurrently.
func (l *appendLog) record(rec appendRecord) error {
	var payload = encodeAppendRecord(rec)
	var deadline = time.Now().Add(appendOrderTimeout)
	l.mu.Lock()
	for {
		var end = l.logged[rec.Journal]
		if l.unguarded[rec.Journal] || rec.Begin <= end {
			break
		}
		var changed = l.changed
		l.mu.Unlock()
		var wait = time.Until(deadline)
		if wait <= 0 {
			slog.Warn("devstack: an append was acknowledged before the content preceding it; logging it anyway",
				"journal", rec.Journal, "begin", rec.Begin, "logged", end)
			l.mu.Lock()
			break
		}
		var timer = time.NewTimer(wait)
		select {
		case <-changed:
		case <-timer.C:
		}
		timer.Stop()
		l.mu.Lock()
	}
	if l.writeErr == nil {
		l.writeErr = l.writeLocked(rec, payload)
	}
	var err, seq = l.writeErr, l.written
	if err == nil {
		var end = max(l.logged[rec.Journal], rec.End)
		l.logged[rec.Journal] = end
		if l.sync {
			l.unsynced = append(l.unsynced, unsyncedRecord{seq: seq, journal: rec.Journal, end: end})
		} else {
			l.durable[rec.Journal] = end // In the page cache, which outlives the process.
		}
		l.changedLocked()
	}
	l.mu.Unlock()
	if err != nil || !l.sync {
		return err
	}
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	if l.synced.Load() >= seq {
		return nil // A sync since covered it.
	}
	l.mu.Lock()
	var f, through, werr = l.f, l.written, l.writeErr
	l.mu.Unlock()
	if f == nil {
		return errors.Join(errors.New("devstack: the append log is closed"), werr)
	}
	if err = l.syncFile(f); errors.Is(err, os.ErrClosed) && l.synced.Load() >= through {
		return nil // A rotation closed the file, having synced it.
	} else if err != nil {
		// What the failed sync covered may never reach the disk, though a
		// later sync succeeds: no append is acknowledged from now on.
		err = fmt.Errorf("devstack: syncing the append log: %w", err)
		l.mu.Lock()
		if l.writeErr == nil {
			l.writeErr = err
		}
		l.mu.Unlock()
		return err
	}
	l.mu.Lock()
	l.raiseSyncedLocked(through)
	l.mu.Unlock()
	return nil
}

func (l *appendLog) writeLocked(rec appendRecord, payload []byte) error {
	if l.f == nil {
		return errors.New("devstack: the append log is closed")
	}
	if l.size >= l.segmentSize {
		if err := l.rotateLocked(); err != nil {
			return fmt.Errorf("devstack: rotating the append log: %w", err)
		}
	}
	var hdr [12]byte
	copy(hdr[:4], appendRecordMagic[:])
	binary.LittleEndian.PutUint32(hdr[4:8], uint32(len(payload)))
	binary.LittleEndian.PutUint32(hdr[8:12], crc32.ChecksumIEEE(payload))
	if _, err := l.w.Write(hdr[:]); err != nil {
		return fmt.Errorf("devstack: writing the append log: %w", err)
	}
	if _, err := l.w.Write(payload); err != nil {
		return fmt.Errorf("devstack: writing the append log: %w", err)
	}
	// Into the file (the page cache survives the process): a record must
	// not linger in this process's buffer once its append is acknowledged.
	if err := l.w.Flush(); err != nil {
		return fmt.Errorf("devstack: writing the append log: %w", err)
	}
	l.size += int64(len(hdr) + len(payload))
	l.ends[rec.Journal] = max(l.ends[rec.Journal], rec.End)
	l.written++
	return nil
}

func encodeAppendRecord(rec appendRecord) []byte {
	var b = make([]byte, 0, 2+len(rec.Journal)+16+len(rec.Content))
	b = binary.LittleEndian.AppendUint16(b, uint16(len(rec.Journal)))
	b = append(b, rec.Journal...)
	b = binary.LittleEndian.AppendUint64(b, uint64(rec.Begin))
	b = binary.LittleEndian.AppendUint64(b, uint64(rec.End))
	return append(b, rec.Content...)
}

func decodeAppendRecord(b []byte) (appendRecord, error) {
	var rec appendRecord
	if len(b) < 2 {
		return rec, errors.New("short record")
	}
	var n = int(binary.LittleEndian.Uint16(b))
	if len(b) < 2+n+16 {
		return rec, errors.New("short record")
	}
	rec.Journal = pb.Journal(b[2 : 2+n])
	rec.Begin = pb.Offset(binary.LittleEndian.Uint64(b[2+n:]))
	rec.End = pb.Offset(binary.LittleEndian.Uint64(b[2+n+8:]))
	rec.Content = b[2+n+16:]
	if rec.End-rec.Begin != int64(len(rec.Content)) {
		return rec, fmt.Errorf("record of journal %s [%d, %d) holds %d bytes", rec.Journal, rec.Begin, rec.End, len(rec.Content))
	}
	return rec, nil
}

// readAppendSegment calls fn with each record of the segment at path. A
// torn or corrupt tail (the process died while writing it; its append was
// never acknowledged) ends the segment.
func readAppendSegment(path string, fn func(appendRecord) error) error {
	var f, err = os.Open(path)
	if err != nil {
		return fmt.Errorf("devstack: reading the append log: %w", err)
	}
	defer f.Close()
	var r = bufio.NewReaderSize(f, 1<<16)
	var offset int64
	for {
		var hdr [12]byte
		if _, err = io.ReadFull(r, hdr[:]); errors.Is(err, io.EOF) {
			return nil
		} else if err != nil || !bytes.Equal(hdr[:4], appendRecordMagic[:]) {
			slog.Warn("append log segment ends in a torn record (written as the process died; never acknowledged)", "segment", path, "offset", offset)
			return nil
		}
		var payload = make([]byte, binary.LittleEndian.Uint32(hdr[4:8]))
		if _, err = io.ReadFull(r, payload); err != nil || crc32.ChecksumIEEE(payload) != binary.LittleEndian.Uint32(hdr[8:12]) {
			slog.Warn("append log segment ends in a torn record (written as the process died; never acknowledged)", "segment", path, "offset", offset)
			return nil
		}
		var rec, derr = decodeAppendRecord(payload)
		if derr != nil {
			return fmt.Errorf("devstack: append log %s offset %d: %w", path, offset, derr)
		}
		if err = fn(rec); err != nil {
			return err
		}
		offset += int64(len(hdr) + len(payload))
	}
}

// setLogged notes that journal's content through end is accounted for (it
// was persisted, or replayed) as the stack starts, or, if guarded is false,
// that it could not be: reads of it never wait.
func (l *appendLog) setLogged(journal pb.Journal, end pb.Offset, guarded bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !guarded {
		l.unguarded[journal] = true
		return
	}
	l.logged[journal] = max(l.logged[journal], end)
	l.durable[journal] = max(l.durable[journal], end)
	l.changedLocked()
}

// waitDurable waits until journal's content through end is logged and on
// disk (synced, if the log syncs), or the log is closed.
func (l *appendLog) waitDurable(ctx context.Context, journal pb.Journal, end pb.Offset) error {
	for {
		l.mu.Lock()
		var done = l.unguarded[journal] || l.durable[journal] >= end || l.shut
		var changed = l.changed
		l.mu.Unlock()
		if done {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// close closes the log. If persisted, every append is in the fragment
// store, and the segments are removed.
func (l *appendLog) close(persisted bool) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	var err error
	if l.f != nil {
		err = errors.Join(l.w.Flush(), l.f.Close())
		l.closed = append(l.closed, closedSegment{path: l.f.Name(), ends: l.ends})
		l.f = nil
	}
	if !l.shut {
		l.shut = true
		l.changedLocked()
	}
	if err != nil || !persisted {
		return err
	}
	for _, s := range l.closed {
		if rerr := os.Remove(s.path); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
			err = errors.Join(err, rerr)
		}
	}
	l.closed = nil
	return err
}

// prune removes the closed segments whose every append the fragment store
// holds: persistedEnd tells, of each journal, through which offset it holds
// all of the journal's content (not merely its largest persisted offset).
func (l *appendLog) prune(ctx context.Context, persistedEnd func(context.Context, pb.Journal) (pb.Offset, error)) error {
	l.mu.Lock()
	var closed = slices.Clone(l.closed)
	l.mu.Unlock()

	var removed = make(map[string]bool)
	for _, s := range closed {
		if s.ends == nil {
			continue // Of an earlier run: replay removes it.
		}
		var done = true
		for journal, end := range s.ends {
			var persisted, err = persistedEnd(ctx, journal)
			if status.Code(err) == codes.NotFound || errors.Is(err, client.ErrJournalNotFound) {
				continue // Deleted: nothing to keep for it.
			} else if err != nil {
				return err
			} else if persisted < end {
				done = false
				break
			}
		}
		if !done {
			// Not yet; a later segment may be. A journal's persisted
			// prefix only grows, so a segment whose every journal it covers
			// goes whatever is left before it: replay appends only what
			// the fragment store lacks, journal by journal. (An earlier
			// segment holding the tail of an idle journal, never persisted,
			// would otherwise keep every segment after it.)
			continue
		}
		if err := os.Remove(s.path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("devstack: removing append log segment: %w", err)
		}
		removed[s.path] = true
	}
	l.mu.Lock()
	l.closed = slices.DeleteFunc(l.closed, func(s closedSegment) bool { return removed[s.path] })
	l.mu.Unlock()
	return nil
}

// appendLoggingServer is a JournalServer whose acknowledgements of appends
// wait for the append log, and which refuses the appends that admit does.
type appendLoggingServer struct {
	pb.JournalServer
	log   *appendLog
	admit func(context.Context) error
}

func (s appendLoggingServer) Append(stream pb.Journal_AppendServer) error {
	return s.JournalServer.Append(&loggedAppendStream{Journal_AppendServer: stream, log: s.log, admit: s.admit})
}

func (s appendLoggingServer) Read(req *pb.ReadRequest, stream pb.Journal_ReadServer) error {
	return s.JournalServer.Read(req, &loggedReadStream{Journal_ReadServer: stream, log: s.log, journal: req.Journal.StripMeta()})
}

// loggedReadStream sends content only once it is logged and on disk, or
// persisted: what a reader reads survives a crash of the stack, as its
// writer's acknowledgement does.
type loggedReadStream struct {
	pb.Journal_ReadServer
	log     *appendLog
	journal pb.Journal
	// persisted is the end of the persisted fragment being read, if the
	// stream reads one: its content survives a crash without the log.
	persisted pb.Offset
}

func (s *loggedReadStream) wait(m any) error {
	var resp, ok = m.(*pb.ReadResponse)
	if !ok {
		return nil
	}
	if f := resp.Fragment; f != nil {
		s.persisted = 0
		if f.BackingStore != "" {
			s.persisted = f.End
		}
	}
	if end := resp.Offset + int64(len(resp.Content)); len(resp.Content) != 0 && end > s.persisted {
		return s.log.waitDurable(s.Context(), s.journal, end)
	}
	return nil
}

func (s *loggedReadStream) Send(resp *pb.ReadResponse) error {
	if err := s.wait(resp); err != nil {
		return err
	}
	return s.Journal_ReadServer.Send(resp)
}

func (s *loggedReadStream) SendMsg(m any) error {
	if err := s.wait(m); err != nil {
		return err
	}
	return s.Journal_ReadServer.SendMsg(m)
}

// loggedAppendStream keeps the content of an append, and logs it before it
// acknowledges the append.
type loggedAppendStream struct {
	pb.Journal_AppendServer
	log      *appendLog
	admit    func(context.Context) error
	admitted bool
	content  []byte
}

func (s *loggedAppendStream) Recv() (*pb.AppendRequest, error) {
	var req, err = s.Journal_AppendServer.Recv()
	if err == nil && !s.admitted {
		// A request a broker proxies carries its Header: the proxying
		// broker, one of the stack's, admitted it.
		if req.Header == nil {
			if err = s.admit(s.Context()); err != nil {
				return nil, err
			}
		}
		s.admitted = true
	}
	if err == nil {
		s.content = append(s.content, req.Content...)
	}
	return req, err
}

func (s *loggedAppendStream) SendAndClose(resp *pb.AppendResponse) error {
	if resp.Status == pb.Status_OK && resp.Commit != nil && resp.Commit.End > resp.Commit.Begin {
		var c = resp.Commit
		if int64(len(s.content)) != c.End-c.Begin {
			return status.Errorf(codes.Internal, "devstack: append to %s committed [%d, %d) but carried %d bytes: not logged", c.Journal, c.Begin, c.End, len(s.content))
		}
		if err := s.log.record(appendRecord{Journal: c.Journal, Begin: c.Begin, End: c.End, Content: s.content}); err != nil {
			// The append is in the broker, but would not survive a crash.
			return status.Errorf(codes.Unavailable, "%v", err)
		}
	}
	return s.Journal_AppendServer.SendAndClose(resp)
}
