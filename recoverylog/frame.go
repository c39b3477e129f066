package recoverylog

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"sync"

	"google.golang.org/protobuf/proto"
)

// frameHeaderLen is the length of an op frame's header.
const frameHeaderLen = 8

// MaxOpLen bounds the encoded length of one op (excluding Write data); a
// frame claiming more is corrupt.
const MaxOpLen = 1 << 20

// MaxWriteLen bounds the data of one Write op. Recorders split larger
// writes, so a player needs at most this much buffer.
const MaxWriteLen = 1 << 20

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ErrCorrupt is wrapped by errors for bytes of the log which are not a valid
// op frame.
var ErrCorrupt = errors.New("corrupt recovery log")

// appendFrame appends the frame of op, and data, to buf.
func appendFrame(buf []byte, op *Op, data []byte) ([]byte, []byte, error) {
	var start = len(buf)
	buf = append(buf, make([]byte, frameHeaderLen)...)
	var err error
	if buf, err = (proto.MarshalOptions{Deterministic: true}).MarshalAppend(buf, op); err != nil {
		return nil, nil, fmt.Errorf("encoding op %d: %w", op.GetSeq(), err)
	}
	var opBytes = buf[start+frameHeaderLen:]
	if len(opBytes) > MaxOpLen {
		return nil, nil, fmt.Errorf("op %d encodes to %d bytes, more than %d", op.GetSeq(), len(opBytes), MaxOpLen)
	}
	binary.LittleEndian.PutUint32(buf[start:], uint32(len(opBytes)))
	binary.LittleEndian.PutUint32(buf[start+4:], crc32.Checksum(opBytes, castagnoli))
	return append(buf, data...), opBytes, nil
}

// frame is one decoded op frame, valid until the next call of decoder.next.
type frame struct {
	op      *Op
	opBytes []byte // Encoding of op, which chains the checksum.
	data    []byte // Data of a Write op.
	begin   int64  // Log offset of the frame's first byte.
	end     int64  // Log offset just past the frame and its data.
	// owned is the buffer of framePool holding data, if the decoder read it
	// into one of its own (see decoder.own): releaseFrame gives it back.
	owned *[]byte
}

// decoder reads op frames from the bytes of a log, positioned at a frame
// boundary. Its bytes hold a whole frame, so a frame's bytes are used in
// place.
type decoder struct {
	src     frameBytes
	offset  int64 // Log offset of the next frame.
	pending int   // Bytes of the last frame, to discard before the next.
	op      Op
	fresh   bool // Each frame has an Op of its own, not op: it's used after the next.
	// own has the data of each write read from a stream (a dataReader) into
	// a buffer of its own (frame.owned), and its op's bytes copied: the frame
	// is used after the next, until released, its data copied once.
	own bool
}

// dataReader is implemented by frameBytes of a stream, which read the data
// of a frame past the bytes peeked into a buffer of the caller's.
type dataReader interface {
	// readFull consumes len(p) bytes into p, or returns the error which
	// ended them.
	readFull(p []byte) error
}

// frameBytes are the bytes of a log which a decoder reads frames from.
type frameBytes interface {
	// peek returns the next n bytes without consuming them or, if fewer
	// remain, those with the error that ended them (io.EOF at their end).
	peek(n int) ([]byte, error)
	// discard consumes n bytes, which a peek returned.
	discard(n int)
}

// maxFrameLen bounds the bytes of one frame, its data included.
const maxFrameLen = frameHeaderLen + MaxOpLen + MaxWriteLen

// initialDecoderBuffer is the size a decoder's buffer starts at: it grows,
// up to maxFrameLen, only as frames need it. (Most frames are small: a
// decoder made for every read of a log, as of a few bytes each, would
// otherwise clear and fault in a buffer of 2 MiB.)
const initialDecoderBuffer = 64 << 10

// newDecoder returns a decoder of r, which is at log offset. If limit is
// non-zero, r ends after at most limit bytes, and the decoder's buffer
// grows no larger.
func newDecoder(r io.Reader, offset, limit int64) *decoder {
	return &decoder{src: newBufferedBytes(r, limit), offset: offset}
}

// bufferedBytes are the bytes of a reader, buffered: a frame's bytes are
// copied into the buffer, which grows to hold the largest.
type bufferedBytes struct {
	br   *bufio.Reader
	most int // The largest br may grow to.
}

// newBufferedBytes returns the bytes of r, buffered. If limit is non-zero,
// r ends after at most limit bytes, and the buffer grows no larger.
func newBufferedBytes(r io.Reader, limit int64) *bufferedBytes {
	var most = maxFrameLen
	if limit > 0 && limit < maxFrameLen {
		most = int(limit)
	}
	return &bufferedBytes{br: bufio.NewReaderSize(r, min(most, initialDecoderBuffer)), most: most}
}

func (b *bufferedBytes) peek(n int) ([]byte, error) {
	if n > b.br.Size() {
		if n > b.most {
			return nil, io.ErrUnexpectedEOF // Past the end of a limited reader.
		}
		// A larger reader of the smaller one, whose buffered bytes it reads
		// first (and whose reads of its own buffer's size or more then go
		// straight to r).
		b.br = bufio.NewReaderSize(b.br, min(b.most, max(n, 2*b.br.Size())))
	}
	return b.br.Peek(n)
}

func (b *bufferedBytes) discard(n int) {
	_, _ = b.br.Discard(n) // Peeked before: it can't fail.
}

// readFull reads the buffered bytes, and then (reads of the buffer's size
// or more) straight from the reader, into p.
func (b *bufferedBytes) readFull(p []byte) error {
	var _, err = io.ReadFull(b.br, p)
	return err
}

// errPartial wraps a read error which ended the reader in the middle of a
// frame; a read error at a frame boundary is returned unwrapped.
type errPartial struct{ err error }

func (e errPartial) Error() string { return "partial op frame: " + e.err.Error() }
func (e errPartial) Unwrap() error { return e.err }

// next decodes the next frame, whose fields remain valid until the next call.
// At a frame boundary, read errors (io.EOF included) are returned as they
// are; within a frame they are wrapped in errPartial; bytes which are no
// valid frame give an error wrapping ErrCorrupt. The error doesn't name the
// journal or offset: callers add them.
func (d *decoder) next(f *frame) error {
	d.src.discard(d.pending)
	d.pending = 0

	var hdr, err = d.src.peek(frameHeaderLen)
	if err != nil {
		if len(hdr) == 0 {
			return err
		}
		return errPartial{noEOF(err)}
	}
	var n = int(binary.LittleEndian.Uint32(hdr))
	var sum = binary.LittleEndian.Uint32(hdr[4:])
	if n == 0 || n > MaxOpLen {
		return fmt.Errorf("%w: op length %d out of range", ErrCorrupt, n)
	}
	buf, err := d.src.peek(frameHeaderLen + n)
	if err != nil {
		return errPartial{noEOF(err)}
	}
	var opBytes = buf[frameHeaderLen:]
	if crc32.Checksum(opBytes, castagnoli) != sum {
		return fmt.Errorf("%w: op checksum mismatch", ErrCorrupt)
	}
	var op = &d.op
	if d.fresh {
		op = new(Op)
	} else {
		op.Reset()
	}
	if err = proto.Unmarshal(opBytes, op); err != nil {
		return fmt.Errorf("%w: decoding op: %v", ErrCorrupt, err)
	}
	var data []byte
	if w := op.GetWrite(); w != nil {
		if w.Length < 0 || w.Length > MaxWriteLen || w.Offset < 0 {
			return fmt.Errorf("%w: write of %d bytes at %d out of range", ErrCorrupt, w.Length, w.Offset)
		}
		if dr, ok := d.src.(dataReader); ok && d.own {
			return d.readOwned(f, dr, op, opBytes, w)
		}
		if buf, err = d.src.peek(frameHeaderLen + n + int(w.Length)); err != nil {
			return errPartial{noEOF(err)}
		}
		opBytes, data = buf[frameHeaderLen:frameHeaderLen+n], buf[frameHeaderLen+n:]
		if crc32.Checksum(data, castagnoli) != w.DataCrc32C {
			return fmt.Errorf("%w: data checksum mismatch of op %d", ErrCorrupt, op.Seq)
		}
	}
	d.pending = len(buf)
	*f = frame{
		op:      op,
		opBytes: opBytes,
		data:    data,
		begin:   d.offset,
		end:     d.offset + int64(len(buf)),
	}
	d.offset = f.end
	return nil
}

// readOwned reads the data of op, a write whose frame's header and op
// (opBytes) were peeked, from dr into a buffer of framePool, and sets f.
func (d *decoder) readOwned(f *frame, dr dataReader, op *Op, opBytes []byte, w *Write) error {
	opBytes = bytes.Clone(opBytes)
	d.src.discard(frameHeaderLen + len(opBytes))
	var owned = getFrameBuf(int(w.Length))
	var data = (*owned)[:w.Length]
	if err := dr.readFull(data); err != nil {
		putFrameBuf(owned)
		return errPartial{noEOF(err)}
	} else if crc32.Checksum(data, castagnoli) != w.DataCrc32C {
		putFrameBuf(owned)
		return fmt.Errorf("%w: data checksum mismatch of op %d", ErrCorrupt, op.Seq)
	}
	*f = frame{
		op:      op,
		opBytes: opBytes,
		data:    data,
		begin:   d.offset,
		end:     d.offset + int64(frameHeaderLen+len(opBytes)+len(data)),
		owned:   owned,
	}
	d.offset = f.end
	return nil
}

// framePool holds buffers for the data of frames, by size class: class c
// holds buffers of minFrameBuf << c bytes, up to MaxWriteLen.
var framePool [framePoolClasses]sync.Pool

const (
	minFrameBuf      = 4 << 10
	framePoolClasses = 9 // minFrameBuf << 8 == MaxWriteLen.
)

// getFrameBuf returns a buffer of framePool of at least n bytes.
func getFrameBuf(n int) *[]byte {
	var c = 0
	for minFrameBuf<<c < n {
		c++
	}
	if c >= framePoolClasses {
		var b = make([]byte, n) // Not reached: n is at most MaxWriteLen.
		return &b
	} else if b, ok := framePool[c].Get().(*[]byte); ok {
		return b
	}
	var b = make([]byte, minFrameBuf<<c)
	return &b
}

// putFrameBuf gives b, of getFrameBuf, back to framePool.
func putFrameBuf(b *[]byte) {
	var n = cap(*b)
	for c := range framePoolClasses {
		if minFrameBuf<<c == n {
			*b = (*b)[:n]
			framePool[c].Put(b)
			return
		}
	}
}

// releaseFrame gives f's buffer back to framePool, if it has one: its data
// is no longer used.
func releaseFrame(f *frame) {
	if f.owned != nil {
		putFrameBuf(f.owned)
		f.owned, f.data = nil, nil
	}
}

func noEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

func crc32Of(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }
