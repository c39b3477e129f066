package recoverylog

import (
	"bytes"
	"errors"
	"hash/crc32"
	"io"
	"testing"
)

// chunkReader returns its bytes in reads of the sizes of sizes, in turn (a
// broker's reads end wherever a fragment or a response does).
type chunkReader struct {
	b     []byte
	sizes []byte
	i     int
}

func (r *chunkReader) Read(p []byte) (int, error) {
	if len(r.b) == 0 {
		return 0, io.EOF
	}
	var n = len(p)
	if len(r.sizes) != 0 {
		n = min(n, 1+int(r.sizes[r.i%len(r.sizes)])*997)
		r.i++
	}
	n = copy(p, r.b[:min(n, len(r.b))])
	r.b = r.b[n:]
	return n, nil
}

// FuzzDecoder encodes Write frames of the sizes the input gives (up to
// MaxWriteLen, so that the decoder's buffer grows from its initial size to
// its largest) and decodes them from reads of varied sizes, whole and with
// the decoder limited to fewer bytes than the frames hold: every frame
// decodes as encoded, and a limited decoder ends with a partial frame, never
// reading past its limit.
func FuzzDecoder(f *testing.F) {
	f.Add([]byte{0, 1, 2}, []byte{}, uint16(0))
	f.Add([]byte{255, 3, 128, 255}, []byte{1, 50, 7}, uint16(3000))
	f.Add([]byte{200, 0, 255, 0, 90}, []byte{0}, uint16(65535))
	f.Fuzz(func(t *testing.T, sizes, reads []byte, cut uint16) {
		if len(sizes) > 8 {
			sizes = sizes[:8]
		}
		var log []byte
		var ends []int64
		for i, s := range sizes {
			// 0..MaxWriteLen, most of the range at its ends.
			var n = int(s) * int(s) * MaxWriteLen / (255 * 255)
			var data = bytes.Repeat([]byte{byte(i + 1)}, n)
			var op = &Op{Seq: uint64(i + 1), Kind: &Op_Write{Write: &Write{
				Fnode: 1, Offset: int64(i), Length: int64(n), DataCrc32C: crc32.Checksum(data, castagnoli),
			}}}
			var err error
			if log, _, err = appendFrame(log, op, data); err != nil {
				t.Fatal(err)
			}
			ends = append(ends, int64(len(log)))
		}
		var decodeAll = func(limit int64) (frames int, err error) {
			var src = &chunkReader{b: log, sizes: reads}
			var r io.Reader = src
			if limit != 0 {
				r = io.LimitReader(src, limit)
			}
			var d = newDecoder(r, 100, limit)
			var fr frame
			for {
				if err = d.next(&fr); err != nil {
					return frames, err
				}
				var w = fr.op.GetWrite()
				if fr.op.Seq != uint64(frames+1) || w == nil || w.Offset != int64(frames) || len(fr.data) != int(w.Length) ||
					(len(fr.data) != 0 && fr.data[0] != byte(frames+1)) {
					t.Fatalf("frame %d decoded as op %v with %d bytes of data", frames, fr.op, len(fr.data))
				}
				if fr.end != 100+ends[frames] {
					t.Fatalf("frame %d ends at %d, want %d", frames, fr.end, 100+ends[frames])
				}
				frames++
			}
		}
		if n, err := decodeAll(0); err != io.EOF || n != len(sizes) {
			t.Fatalf("decoded %d frames of %d, then %v; want io.EOF", n, len(sizes), err)
		}
		if len(log) == 0 {
			return
		}
		// Limited to a prefix of the frames.
		var limit = 1 + int64(cut)*int64(len(log)-1)/65535
		var want int
		for want < len(ends) && ends[want] <= limit {
			want++
		}
		var n, err = decodeAll(limit)
		if n != want {
			t.Fatalf("limited to %d bytes, decoded %d frames, want %d", limit, n, want)
		}
		var partial errPartial
		if limit == int64(len(log)) || (want != 0 && ends[want-1] == limit) {
			if err != io.EOF {
				t.Fatalf("limited to %d bytes, at a frame's end: %v, want io.EOF", limit, err)
			}
		} else if !errors.As(err, &partial) || !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("limited to %d bytes, within a frame: %v, want a partial frame", limit, err)
		}
	})
}
