package recoverylog

import (
	"bytes"
	"context"
	"errors"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gazconsumer/gazconsumer/devstack/devstacktest"
	"github.com/gazconsumer/gazconsumer/specs"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.gazette.dev/core/broker/client"
	pb "go.gazette.dev/core/broker/protocol"
)

// FuzzMappedDecoder encodes frames of the sizes the input gives, cuts the
// log into fragment files where the input says (frames spanning them),
// maps a prefix of those files and reads the rest in reads of varied sizes,
// as a playback of a range whose newest fragments aren't persisted does,
// and decodes them ahead of their use, through an end which may cut a
// frame: every frame decodes as encoded, each still holding its bytes once
// all are decoded, and the reads end as a buffered decoder's of the same
// bytes do. A stream of the log's bytes, decoded ahead (its writes' data
// read into buffers of their own), decodes the same frames and ends alike.
func FuzzMappedDecoder(f *testing.F) {
	f.Add([]byte{0, 1, 2}, []byte{10, 90}, uint8(1), uint16(65535), []byte{})
	f.Add([]byte{255, 3, 128, 255, 40}, []byte{1, 50, 51, 200}, uint8(4), uint16(30000), []byte{1, 50, 7})
	f.Add([]byte{200, 0, 255, 0, 90}, []byte{128}, uint8(0), uint16(65535), []byte{0})
	f.Add([]byte{30, 30, 30, 30}, []byte{3, 4, 5, 6, 7, 8}, uint8(3), uint16(100), []byte{2})
	f.Fuzz(func(t *testing.T, sizes, cuts []byte, mapped uint8, cut uint16, reads []byte) {
		if len(sizes) > 8 {
			sizes = sizes[:8]
		}
		if len(cuts) > 16 {
			cuts = cuts[:16]
		}
		const base = 1000 // The log offset of the first frame.
		var log []byte
		var ends []int64
		for i, s := range sizes {
			var op *Op
			var data []byte
			if s%5 == 4 {
				// An op without data.
				op = &Op{Seq: uint64(i + 1), Kind: &Op_Create{Create: &Create{Path: strings.Repeat("p", int(s))}}}
			} else {
				// 0..MaxWriteLen, most of the range at its ends.
				data = make([]byte, int(s)*int(s)*MaxWriteLen/(255*255))
				for j := range data {
					data[j] = byte(i*31 + j)
				}
				op = &Op{Seq: uint64(i + 1), Kind: &Op_Write{Write: &Write{
					Fnode: 1, Offset: int64(i), Length: int64(len(data)), DataCrc32C: crc32.Checksum(data, castagnoli),
				}}}
			}
			var err error
			if log, _, err = appendFrame(log, op, data); err != nil {
				t.Fatal(err)
			}
			ends = append(ends, int64(len(log)))
		}
		if len(log) == 0 {
			return
		}
		// Fragments: the log cut at the input's fractions of its length.
		var bounds = []int64{0}
		for _, c := range cuts {
			var at = int64(c) * int64(len(log)) / 256
			if at > bounds[len(bounds)-1] {
				bounds = append(bounds, at)
			}
		}
		bounds = append(bounds, int64(len(log)))
		var nFrags = len(bounds) - 1
		var nMapped = 1 + int(mapped)%nFrags // The fragments mapped; the rest are read.
		var end = 1 + int64(cut)*int64(len(log)-1)/65535

		var m = &mappedBytes{off: base, mappedEnd: base + bounds[nMapped], end: base + end}
		defer m.unmap()
		var dir = t.TempDir()
		for i := range nMapped {
			var path = filepath.Join(dir, "fragment")
			if err := os.WriteFile(path, log[bounds[i]:bounds[i+1]], 0o644); err != nil {
				t.Fatal(err)
			}
			var data, err = mapFile(path, bounds[i+1]-bounds[i])
			if err != nil {
				t.Fatal(err)
			} else if err = os.Remove(path); err != nil { // It stays mapped.
				t.Fatal(err)
			}
			m.frags = append(m.frags, mappedFragment{begin: base + bounds[i], end: base + bounds[i+1], data: data})
		}
		if m.mappedEnd < m.end {
			m.rest = newBufferedBytes(io.LimitReader(&chunkReader{b: log[bounds[nMapped]:], sizes: reads}, end-bounds[nMapped]), end-bounds[nMapped])
		}
		var ahead = newDecodeAhead("fuzz/log", &decoder{src: m, offset: base}, func() bool { return m.inPlace }, func() {})
		defer ahead.stop()
		var frames []frame
		var err error
		for {
			var fr frame
			if err = ahead.next(&fr); err != nil {
				break
			}
			frames = append(frames, fr)
		}

		// What a buffered decoder of the same bytes reads.
		var want int
		for want < len(ends) && ends[want] <= end {
			want++
		}
		if len(frames) != want {
			t.Fatalf("decoded %d frames through offset %d, want %d (then %v)", len(frames), end, want, err)
		}
		var bd = newDecoder(bytes.NewReader(log[:end]), base, end)
		var bf frame
		for i, fr := range frames {
			if berr := bd.next(&bf); berr != nil {
				t.Fatalf("buffered decoder: frame %d: %v", i, berr)
			}
			if fr.op.Seq != uint64(i+1) || fr.begin != bf.begin || fr.end != bf.end || fr.end != base+ends[i] ||
				!bytes.Equal(fr.data, bf.data) || !bytes.Equal(fr.opBytes, bf.opBytes) {
				t.Fatalf("frame %d: op %v [%d, %d) with %d bytes of data, want op %v [%d, %d) with %d",
					i, fr.op, fr.begin, fr.end, len(fr.data), bf.op, bf.begin, bf.end, len(bf.data))
			}
		}
		var berr = bd.next(&bf)
		var partial, bpartial errPartial
		if errors.Is(err, io.EOF) != errors.Is(berr, io.EOF) || errors.As(err, &partial) != errors.As(berr, &bpartial) ||
			errors.Is(err, io.ErrUnexpectedEOF) != errors.Is(berr, io.ErrUnexpectedEOF) {
			t.Fatalf("reads ended with %v, a buffered decoder's with %v", err, berr)
		}
		if ahead.offset != bd.offset {
			t.Fatalf("reads ended at offset %d, a buffered decoder's at %d", ahead.offset, bd.offset)
		}

		// A stream of the same bytes, in reads of the same sizes, decoded
		// ahead: its writes' data read into buffers of their own.
		var stream = newDecodeAhead("fuzz/log", newDecoder(&chunkReader{b: log[:end], sizes: reads}, base, end),
			func() bool { return false }, func() {})
		defer stream.stop()
		var streamed int
		for ; ; streamed++ {
			// Each frame is checked, then released, as a playback does:
			// frames ahead hold at most ownedAhead bytes of buffers.
			var fr frame
			if err = stream.next(&fr); err != nil {
				break
			} else if streamed == len(frames) {
				t.Fatalf("streamed frame %d, past the %d frames through offset %d", streamed, want, end)
			} else if w := fr.op.GetWrite(); w != nil && fr.owned == nil {
				t.Fatalf("streamed frame %d: a write of %d bytes without a buffer of its own", streamed, w.Length)
			}
			var mf = frames[streamed]
			if fr.begin != mf.begin || fr.end != mf.end || !bytes.Equal(fr.data, mf.data) || !bytes.Equal(fr.opBytes, mf.opBytes) {
				t.Fatalf("streamed frame %d: [%d, %d) with %d bytes of data, want [%d, %d) with %d",
					streamed, fr.begin, fr.end, len(fr.data), mf.begin, mf.end, len(mf.data))
			}
			stream.release(&fr)
		}
		if streamed != want {
			t.Fatalf("streamed %d frames through offset %d, want %d (then %v)", streamed, end, want, err)
		}
		if errors.Is(err, io.EOF) != errors.Is(berr, io.EOF) || errors.As(err, &partial) != errors.As(berr, &bpartial) ||
			errors.Is(err, io.ErrUnexpectedEOF) != errors.Is(berr, io.ErrUnexpectedEOF) {
			t.Fatalf("stream's reads ended with %v, a buffered decoder's with %v", err, berr)
		} else if stream.offset != bd.offset {
			t.Fatalf("stream's reads ended at offset %d, a buffered decoder's at %d", stream.offset, bd.offset)
		}
	})
}

// A mapped fragment file truncated under a playback (as none should be)
// fails the playback with an error naming the journal and offset, rather
// than crash the process.
func TestMappedFileTruncatedIsAnError(t *testing.T) {
	var log []byte
	for i := range 4 {
		var data = bytes.Repeat([]byte{byte(i)}, 256<<10)
		var err error
		if log, _, err = appendFrame(log, &Op{Seq: uint64(i + 1), Kind: &Op_Write{Write: &Write{
			Fnode: 1, Length: int64(len(data)), DataCrc32C: crc32.Checksum(data, castagnoli),
		}}}, data); err != nil {
			t.Fatal(err)
		}
	}
	var path = filepath.Join(t.TempDir(), "fragment")
	if err := os.WriteFile(path, log, 0o644); err != nil {
		t.Fatal(err)
	}
	var data, err = mapFile(path, int64(len(log)))
	if err != nil {
		t.Fatal(err)
	} else if err = os.Truncate(path, 4096); err != nil {
		t.Fatal(err)
	}
	var m = &mappedBytes{off: 0, mappedEnd: int64(len(log)), end: int64(len(log)),
		frags: []mappedFragment{{begin: 0, end: int64(len(log)), data: data}}}
	defer m.unmap()
	var ahead = newDecodeAhead("truncated/log", &decoder{src: m}, func() bool { return m.inPlace }, func() {})
	defer ahead.stop()
	var f frame
	if err = ahead.next(&f); err == nil || !strings.Contains(err.Error(), "journal truncated/log offset 0: reading a mapped fragment file faulted") {
		t.Fatalf("reading a truncated mapped file: %v, want a fault naming the journal and offset", err)
	}
}

// A player given the root of the log's file:// store plays the persisted
// fragments of its hinted ranges from their files, mapped, and reads the
// rest (the log's newest fragments) through the brokers: it plays the same
// files as one reading them all through their URLs. One not given the root,
// or not reading directly, maps none.
func TestPlaybackMapsPersistedFragments(t *testing.T) {
	var ctx, cancel = context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var journal = newLog(t) // Of fragments of 64 KiB.
	defer client.InstallFileTransport(stack.FragmentsRoot())()
	var m = newMirror(t, journal, nil, 0xD1)
	for i := range 6 {
		var name = string(rune('a' + i))
		m.create(name)
		for j := range 5 {
			// Writes of 1 to 120 KiB, some of two appends (see Recorder).
			m.write(name, bytes.Repeat([]byte{byte(i), byte(j)}, 512+(i*5+j)*2048), -1)
		}
	}
	m.remove("b")
	m.hints()
	m.create("newest")
	m.write("newest", []byte("not yet persisted"), -1)
	var hints = m.hints()
	waitPersisted(t, ctx, journal, firstOffset(journal, hints))

	var hinted int64
	for _, r := range hintedRanges(hints) {
		hinted += r.EndOffset - r.FirstOffset
	}
	for _, tc := range []struct {
		name     string
		direct   bool
		root     string
		wantSome bool
	}{
		{"mapped", true, stack.FragmentsRoot(), true},
		{"through URLs", true, "", false},
		{"through brokers", false, stack.FragmentsRoot(), false},
	} {
		var before = testutil.ToFloat64(mappedBytesPlayed)
		var p = NewPlayer(stack.Journals(), journal, t.TempDir(), 0xD2)
		p.DoNotProxy, p.FileRoot = tc.direct, tc.root
		p.FinishAtWriteHead()
		if _, err := p.Play(ctx, hints); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		sameTree(t, m.dir, p.dir)
		var mapped = int64(testutil.ToFloat64(mappedBytesPlayed) - before)
		if tc.wantSome && (mapped == 0 || mapped >= hinted) {
			t.Fatalf("%s: mapped %d bytes of %d hinted, want some, not the newest", tc.name, mapped, hinted)
		} else if !tc.wantSome && mapped != 0 {
			t.Fatalf("%s: mapped %d bytes, want none", tc.name, mapped)
		}
		t.Logf("%s: mapped %d of %d hinted bytes", tc.name, mapped, hinted)
	}
}

// A log whose fragments are compressed is played from its fragment files
// through their URLs, as Gazette's readers decompress them, not mapped: to
// the same files.
func TestPlaybackReadsCompressedFragmentsThroughURLs(t *testing.T) {
	needStack(t)
	var ctx, cancel = context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var prefix = stack.Name("snappy-logs")
	var yaml = strings.Replace(devstacktest.Journals(prefix, 1, 65536), "compression_codec: NONE", "compression_codec: SNAPPY", 1)
	if _, err := specs.ApplyJournals(ctx, stack.Journals(), "test journal "+prefix, []byte(yaml)); err != nil {
		t.Fatal(err)
	}
	var journal = pb.Journal(prefix + "/00")
	defer client.InstallFileTransport(stack.FragmentsRoot())()

	var m = newMirror(t, journal, nil, 0xE1)
	for i := range 4 {
		var name = string(rune('a' + i))
		m.create(name)
		for j := range 4 {
			m.write(name, bytes.Repeat([]byte{byte(i), byte(j), 'x'}, 4096+(i*4+j)*4096), -1)
		}
	}
	var hints = m.hints()
	// A broker rolls a journal's spool to a fragment of its own as an
	// append begins (or at its pulse, each minute): an append after the
	// hinted ones has it roll theirs, and persist them.
	m.create("newest")
	m.write("newest", []byte("not yet persisted"), -1)
	hints = m.hints()
	waitPersisted(t, ctx, journal, firstOffset(journal, hints))

	var before = testutil.ToFloat64(mappedBytesPlayed)
	var p = NewPlayer(stack.Journals(), journal, t.TempDir(), 0xE2)
	p.DoNotProxy, p.FileRoot = true, stack.FragmentsRoot()
	p.FinishAtWriteHead()
	if _, err := p.Play(ctx, hints); err != nil {
		t.Fatal(err)
	}
	sameTree(t, m.dir, p.dir)
	if mapped := testutil.ToFloat64(mappedBytesPlayed) - before; mapped != 0 {
		t.Fatalf("mapped %v bytes of compressed fragments; want none", mapped)
	}
}

// A stream's frames decoded ahead hold at most ownedAhead bytes of buffers
// of their own (and one frame more) until the player releases them.
func TestDecodeAheadBoundsOwnedBytes(t *testing.T) {
	var log []byte
	var data = bytes.Repeat([]byte("d"), MaxWriteLen)
	const n = 3 * ownedAhead / MaxWriteLen
	for i := range n {
		var err error
		if log, _, err = appendFrame(log, &Op{Seq: uint64(i + 1), Kind: &Op_Write{Write: &Write{
			Fnode: 1, Length: int64(len(data)), DataCrc32C: crc32.Checksum(data, castagnoli),
		}}}, data); err != nil {
			t.Fatal(err)
		}
	}
	var ahead = newDecodeAhead("bounded/log", newDecoder(bytes.NewReader(log), 0, int64(len(log))), func() bool { return false }, func() {})
	defer ahead.stop()
	var held []frame
	for len(held) < n {
		// Frames are taken, not released, until no more are ahead.
		var f frame
		select {
		case d := <-ahead.ch:
			if f, held = d.f, append(held, d.f); d.err != nil {
				t.Fatal(d.err)
			}
		case <-time.After(200 * time.Millisecond):
		}
		if got := ahead.owned.Load(); got > ownedAhead+MaxWriteLen {
			t.Fatalf("%d frames ahead hold %d bytes of buffers, more than %d and a frame", len(held), got, ownedAhead)
		}
		if f.owned == nil {
			break // None more ahead.
		}
	}
	if len(held) >= n || len(held) < ownedAhead/MaxWriteLen {
		t.Fatalf("took %d of %d frames of %d bytes before the decoder waited", len(held), n, MaxWriteLen)
	}
	// Released, the rest follow.
	for i := range held {
		ahead.release(&held[i])
	}
	for got := len(held); got < n; got++ {
		var f frame
		if err := ahead.next(&f); err != nil {
			t.Fatalf("frame %d of %d: %v", got, n, err)
		}
		ahead.release(&f)
	}
	if ahead.owned.Load() != 0 {
		t.Fatalf("%d bytes of buffers held once every frame was released", ahead.owned.Load())
	}
}
