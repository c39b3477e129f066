package recoverylog

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"path/filepath"
	"runtime/debug"
	"sync"
	"sync/atomic"

	pb "go.gazette.dev/core/broker/protocol"
)

// A player given the local root of its log's file:// fragment store
// (Player.FileRoot) plays the hinted ranges of persisted, uncompressed
// fragments from their files mapped into memory: a frame's bytes are
// checked and written to its file where the page cache holds them, rather
// than copied through the fragment's URL, a reader and the decoder's
// buffer first. The kernel reads each range's files ahead (as it reads the
// streams of the ranges after the current one ahead). Fragment files are
// written once, under a temporary name, and renamed into place, so a
// mapped file does not change; one removed meanwhile stays mapped.

// mappedFragment is a fragment's file, mapped into memory.
type mappedFragment struct {
	begin, end int64  // Log offsets of the fragment's content.
	data       []byte // Its file's bytes, the content of [begin, end).
}

// mappedBytes are the log bytes [off, end) of fragment files mapped into
// memory, through mappedEnd, and then of rest, which a decoder reads frames
// of: in place, but for a frame spanning fragments. The fragments stay
// mapped until unmap, so that frames read in place stay valid after the
// next is read.
type mappedBytes struct {
	frags     []mappedFragment // In order and contiguous.
	at        int              // Index of the fragment holding off, while off < mappedEnd.
	inPlace   bool             // The last peek's bytes are of a mapped file, valid until unmap.
	off       int64            // Log offset of the next byte.
	populated int64            // Log offset through which the mapped pages are populated.
	mappedEnd int64            // Log offset the mapped fragments end at.
	end       int64            // Log offset the bytes end at.
	rest      frameBytes       // Bytes [mappedEnd, end), if any: a read of the log.
	scratch   []byte           // A frame which spans fragments, copied.
}

func (m *mappedBytes) peek(n int) ([]byte, error) {
	m.inPlace = false
	if m.off >= m.mappedEnd && m.rest != nil {
		return m.rest.peek(n)
	}
	var want, err = int64(n), error(nil)
	if m.off+want > m.end {
		want, err = m.end-m.off, io.EOF
	}
	if want == 0 {
		return nil, err
	}
	m.populate(m.off + want)
	if f := m.frags[m.at]; m.off+want <= f.end {
		m.inPlace = true
		return f.data[m.off-f.begin : m.off-f.begin+want], err
	}
	// The bytes span fragments (a frame written across a fragment's end),
	// or the mapped fragments and the rest.
	m.scratch = m.scratch[:0]
	var at = m.off
	for i := m.at; i < len(m.frags) && at < m.off+want; i++ {
		var f = m.frags[i]
		var to = min(f.end, m.off+want)
		m.scratch = append(m.scratch, f.data[at-f.begin:to-f.begin]...)
		at = to
	}
	if at < m.off+want {
		var b, rerr = m.rest.peek(int(m.off + want - at))
		if m.scratch = append(m.scratch, b...); rerr != nil {
			err = rerr
		}
	}
	return m.scratch, err
}

// populateAhead is how many bytes of mapped files are populated at once.
const populateAhead = 4 << 20

// populate populates the pages of the mapped files through log offset to,
// and populateAhead further.
func (m *mappedBytes) populate(to int64) {
	for i := m.at; m.populated < to && i < len(m.frags); i++ {
		var f = m.frags[i]
		if m.populated >= f.end {
			continue
		}
		var from = max(m.populated, f.begin, m.off)
		var through = min(f.end, m.end, max(to, from+populateAhead))
		populate(f.data, from-f.begin, through-f.begin)
		m.populated = through
		if through < f.end {
			break
		}
	}
}

func (m *mappedBytes) discard(n int) {
	var mapped = min(int64(n), max(m.mappedEnd-m.off, 0))
	m.off += mapped
	for m.at < len(m.frags) && m.off >= m.frags[m.at].end {
		m.at++
	}
	if rest := int64(n) - mapped; rest != 0 {
		m.rest.discard(int(rest))
		m.off += rest
	}
}

// unmap unmaps the fragments: the frames read of them are no longer valid.
func (m *mappedBytes) unmap() {
	for _, f := range m.frags {
		unmapFile(f.data)
	}
	m.frags = nil
}

// mapRange maps the fragment files holding log range [offset, end), from
// offset through the first fragment not persisted (the log's newest), if
// this player reads fragments directly and was given the root of their
// file:// store. It returns nil if it maps none: the range is then read
// through the fragments' URLs or the brokers, as is the rest of a range
// mapped in part.
func (p *Player) mapRange(ctx context.Context, offset, end int64) *mappedBytes {
	if !p.direct || p.FileRoot == "" || end <= offset {
		return nil
	}
	var m = &mappedBytes{off: offset, mappedEnd: offset, end: end}
	var stop = func(why string, args ...any) *mappedBytes {
		slog.Debug("recovery log: reading hinted content through fragment URLs rather than mapped files; "+why,
			append([]any{"journal", p.journal, "begin", m.mappedEnd, "end", end}, args...)...)
		if m.mappedEnd == offset {
			return nil
		}
		mappedBytesPlayed.Add(float64(m.mappedEnd - offset))
		return m
	}
	for m.mappedEnd < end {
		var at = m.mappedEnd
		var resp, err = p.fragmentAt(ctx, at)
		if err != nil {
			return stop("listing its fragments failed", "err", err)
		} else if resp == nil {
			return stop("its fragment is not persisted")
		}
		var frag = resp.Fragment
		if frag.Begin > at || frag.End <= at {
			return stop("no fragment holds it", "fragment", frag.ContentName())
		} else if frag.CompressionCodec != pb.CompressionCodec_NONE {
			return stop("its fragment is compressed", "fragment", frag.ContentName(), "codec", frag.CompressionCodec)
		}
		var u, perr = url.Parse(resp.FragmentUrl)
		if perr != nil || u.Scheme != "file" {
			return stop("its fragment's store is not a file:// store", "fragment", frag.ContentName(), "store", frag.BackingStore)
		}
		var path = filepath.Join(p.FileRoot, filepath.FromSlash(u.Path))
		data, err := mapFile(path, frag.End-frag.Begin)
		if err != nil {
			return stop("mapping its fragment's file failed", "path", path, "err", err)
		}
		// The kernel reads the range's bytes of the file ahead of the playback.
		adviseWillNeed(data, at-frag.Begin, min(end, frag.End)-frag.Begin)
		m.frags = append(m.frags, mappedFragment{begin: frag.Begin, end: frag.End, data: data})
		m.mappedEnd = frag.End
	}
	mappedBytesPlayed.Add(float64(min(m.mappedEnd, end) - offset))
	return m
}

// mappedFault returns the error of r, a value recovered from a panic, if
// it's a fault reading a mapped fragment file (the file was truncated, or
// its disk failed) of journal at offset, which a goroutine reading such
// files with debug.SetPanicOnFault recovers from. Any other panic goes on.
func mappedFault(journal pb.Journal, offset int64, r any) error {
	if _, ok := r.(interface{ Addr() uintptr }); !ok {
		panic(r)
	}
	return fmt.Errorf("journal %s offset %d: reading a mapped fragment file faulted (was it truncated?): %v", journal, offset, r)
}

// decodeAhead reads the frames of a decoder in a goroutine of its own,
// ahead of their playback: checking a frame's checksums (of a mapped file,
// the reads of its pages) on one processor while the player writes the
// frames before it on another. Frames read in place from mapped files are
// used as they are; others (of a stream, spanning fragments, or read from a
// mapped range's rest) are copied out of the decoder's buffer.
type decodeAhead struct {
	cancel func() // Cancels a read the decoder may block in.
	ch     chan decodedFrame
	done   chan struct{}
	wg     sync.WaitGroup
	offset int64 // Log offset of the next frame, or of the error which ended them.
	// owned is the bytes of the buffers of frames decoded and not yet
	// released (frame.owned); freed wakes the decoder as they're released.
	owned atomic.Int64
	freed chan struct{}
}

// decodedFrame is a frame read ahead, or the error which ended the reads
// at offset.
type decodedFrame struct {
	f      frame
	err    error
	offset int64
}

// framesAhead is how many frames a decodeAhead reads ahead of their use,
// and ownedAhead how many bytes of buffers of their own they may hold (see
// decoder.own): at most one frame more once they hold that many.
const (
	framesAhead = 32
	ownedAhead  = 8 << 20
)

// newDecodeAhead reads the frames of dec ahead, until stopped. inPlace
// reports whether the frame dec read last may be used after the next
// (its bytes are of a mapped file); cancel cancels a read dec may block in.
func newDecodeAhead(journal pb.Journal, dec *decoder, inPlace func() bool, cancel func()) *decodeAhead {
	var a = &decodeAhead{cancel: cancel, ch: make(chan decodedFrame, framesAhead), done: make(chan struct{}),
		offset: dec.offset, freed: make(chan struct{}, 1)}
	dec.fresh, dec.own = true, true
	a.wg.Go(func() {
		defer close(a.ch)
		var send = func(d decodedFrame) bool {
			select {
			case a.ch <- d:
				return d.err == nil
			case <-a.done:
				return false
			}
		}
		// A fault reading a mapped file (were it truncated) panics rather
		// than crash the process: it ends the playback with its error.
		defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
		defer func() {
			if r := recover(); r != nil {
				send(decodedFrame{err: mappedFault(journal, dec.offset, r), offset: dec.offset})
			}
		}()
		for {
			for a.owned.Load() >= ownedAhead {
				select {
				case <-a.freed:
				case <-a.done:
					return
				}
			}
			var f frame
			var err = dec.next(&f)
			if err == nil && f.owned != nil {
				a.owned.Add(int64(cap(*f.owned)))
			} else if err == nil && !inPlace() {
				f.opBytes, f.data = bytes.Clone(f.opBytes), bytes.Clone(f.data)
			}
			if !send(decodedFrame{f: f, err: err, offset: dec.offset}) {
				return
			}
		}
	})
	return a
}

// next returns the next frame, as decoder.next does.
func (a *decodeAhead) next(f *frame) error {
	var d, ok = <-a.ch
	if !ok {
		return io.ErrClosedPipe // Not reached: reads end with an error, which is received.
	}
	*f, a.offset = d.f, d.offset
	return d.err
}

// release gives back the buffer of f, a frame of next, once its data is no
// longer used.
func (a *decodeAhead) release(f *frame) {
	if f.owned == nil {
		return
	}
	a.owned.Add(-int64(cap(*f.owned)))
	releaseFrame(f)
	select {
	case a.freed <- struct{}{}:
	default:
	}
}

// stop ends the reads ahead, and waits for their goroutine (which a read
// of m's rest may hold until cancelled).
func (a *decodeAhead) stop() {
	close(a.done)
	a.cancel()
	a.wg.Wait()
}
