package recoverylog

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"testing"

	"google.golang.org/protobuf/proto"
)

// applyAll decodes and applies the frames of log[from:to] to fsm, until the
// end or the first invalid frame or op.
func applyAll(fsm *FSM, log []byte, from, to int64) error {
	return applyAt(fsm, log[from:to], from)
}

// applyAt decodes and applies the frames of b, which begin at log offset
// at, to fsm, until the end or the first invalid frame or op.
func applyAt(fsm *FSM, b []byte, at int64) error {
	var dec = newDecoder(bytes.NewReader(b), at, int64(len(b)))
	var f frame
	for {
		if err := dec.next(&f); err == io.EOF {
			return nil
		} else if err != nil {
			return fmt.Errorf("offset %d: %w", dec.offset, err)
		}
		if _, err := fsm.Apply(f.op, f.opBytes, f.begin, f.end); err != nil && !errors.Is(err, ErrNotFollowing) {
			return err
		}
	}
}

// FuzzFSM decodes and applies arbitrary logs. Whatever prefix of the log is
// valid, its hints must replay to the very same FSM while reading only the
// hinted segments.
func FuzzFSM(f *testing.F) {
	f.Add(forkedLog(f))
	var c = &chain{seq: 1, author: 0xA}
	c.add(f, fence(), nil)
	c.add(f, create("a"), nil)
	c.write(f, 2, 0, "aaaa")
	c.add(f, create("b"), nil)
	c.add(f, &Op{Kind: &Op_Link{Link: &Link{Fnode: 2, Path: "c"}}}, nil)
	c.add(f, &Op{Kind: &Op_Unlink{Unlink: &Unlink{Fnode: 2, Path: "a"}}}, nil)
	c.add(f, &Op{Kind: &Op_Property{Property: &Property{Path: "CURRENT", Content: []byte("x")}}}, nil)
	c.write(f, 4, 10, "bb")
	c.add(f, &Op{Kind: &Op_Unlink{Unlink: &Unlink{Fnode: 4, Path: "b"}}}, nil)
	c.add(f, &Op{Kind: &Op_Adopt{Adopt: &Adopt{Links: []string{"e", "f"}, Source: fuzzSource(7)}}}, nil)
	c.write(f, 10, 70, "appended to what's adopted")
	f.Add(c.take())
	f.Add(duplicatedLog(f))
	f.Add([]byte("garbage"))
	f.Add([]byte{})

	f.Fuzz(checkHintedReplay)
}

// checkHintedReplay fails t unless replay of the hints of log's valid
// history, reading only hinted segments, rebuilds the same FSM.
func checkHintedReplay(t *testing.T, log []byte) {
	var full = NewFSM()
	var end = int64(len(log))
	if err := applyAll(full, log, 0, end); err != nil {
		end = full.NextOffset() // Replay only the valid prefix.
	}
	if full.NextSeq() == 1 {
		return // No valid op.
	}
	var h = full.Hints("fuzz")
	if err := validateHints(h); err != nil {
		t.Fatalf("FSM made invalid hints: %v", err)
	}
	var hinted = NewFSM()
	hinted.beginHinted(h)
	for _, r := range hintedRanges(h) {
		hinted.resetChain(r.FirstSeq, r.FirstChecksum, r.FirstOffset, Author(r.Author))
		if err := applyAll(hinted, log, r.FirstOffset, r.EndOffset); err != nil {
			t.Fatalf("replaying hinted range %v: %v", r, err)
		} else if hinted.NextSeq() <= r.LastSeq {
			t.Fatalf("replaying hinted range %v ended at seq %d", r, hinted.NextSeq())
		}
	}
	if err := hinted.endHinted(h); err != nil {
		t.Fatal(err)
	}
	if err := applyAll(hinted, log, hinted.NextOffset(), end); err != nil {
		t.Fatalf("replaying after the hints: %v", err)
	}
	if got := hinted.Hints("fuzz"); !proto.Equal(got, h) {
		t.Fatalf("hinted replay gives hints\n%v\nwant\n%v", got, h)
	}
}

// duplicatedLog returns a log in which appends of ops are committed more
// than once, back to back, as after lost acknowledgements: the copies repeat
// seqs already played, and are skipped.
func duplicatedLog(t testing.TB) []byte {
	var c = &chain{seq: 1, author: 0xA}
	c.add(t, fence(), nil)
	c.add(t, create("a"), nil) // Fnode 2.
	c.write(t, 2, 0, "hello")
	var appended = c.take()
	var log = append(bytes.Clone(appended), appended...)
	c.write(t, 2, 5, " world")
	c.add(t, create("b"), nil) // Fnode 5.
	appended = c.take()
	log = append(log, appended...)
	log = append(log, appended...)
	log = append(log, appended...)
	c.write(t, 5, 0, "b")
	return append(log, c.take()...)
}

// FuzzFSMOps builds logs of well-framed ops, chained or forked, from
// arbitrary program bytes, and checks replay from their hints. Appends may
// be committed more than once, back to back, as after lost
// acknowledgements. Beside an FSM of the log, it models a Recorder's: one
// which applies main's ops at the offsets it expects, then moves them past
// the bytes it finds the log holds before them (copies, and other writers'
// ops), and checks that its hints replay the log too.
func FuzzFSMOps(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12})
	f.Add([]byte{0, 0, 0, 1, 1, 1, 2, 2, 3, 3, 3, 7, 7, 7, 8, 9, 1, 1, 0, 0})
	f.Add(bytes.Repeat([]byte{0, 17, 1, 33, 1, 200, 4, 3}, 40))
	// Adopted nodes (7 with an odd arg), written to, rebased and unlinked.
	f.Add([]byte{0, 0, 7, 5, 1, 3, 7, 15, 0x40, 2, 4, 1, 7, 9, 0x40, 3, 3, 6, 4, 2})
	// Rebases, complete and not, among writes, links and unlinks.
	f.Add([]byte{0, 0, 1, 9, 0, 1, 2, 5, 0x40, 0, 1, 7, 3, 4, 0x40, 1, 0x40, 4, 2, 8, 4, 0, 0x40, 0, 1, 1})
	// Appends committed twice (0x20) and three times (0x30), forks' too.
	f.Add([]byte{0, 0, 0x21, 3, 0x20, 1, 1, 7, 0x32, 9, 0x66, 0, 6, 5, 1, 3, 0x81, 4, 0xa1, 4, 0x21, 2, 4, 0, 0x35, 1, 0x61, 0, 0, 1, 0x22, 2})

	f.Fuzz(func(t *testing.T, prog []byte) {
		var paths = []string{"a", "b", "d/c", "d/e"}
		var main = &chain{seq: 1, author: 0xA}
		main.add(t, fence(), nil)
		var log = main.take()
		var other *chain
		var fsm = NewFSM() // Tracks main, to aim ops at live nodes.
		if err := applyAll(fsm, log, 0, int64(len(log))); err != nil {
			t.Fatal(err)
		}
		// valid plays the whole log as a player does, while it's valid.
		// rec models the FSM of main's Recorder, while main's ops are
		// valid: another writer's fence deposes it.
		var valid, rec = NewFSM(), NewFSM()
		if err := applyAll(valid, log, 0, int64(len(log))); err != nil {
			t.Fatal(err)
		} else if err = applyAll(rec, log, 0, int64(len(log))); err != nil {
			t.Fatal(err)
		}
		var play = func(from int64) {
			if valid != nil && applyAll(valid, log, from, int64(len(log))) != nil {
				valid, rec = nil, nil
			}
		}
		var recorded = func() bool {
			return valid != nil && rec != nil && valid.NextSeq() == rec.NextSeq() && valid.NextChecksum() == rec.NextChecksum()
		}
		// record applies main's ops of chunk, which the log holds at at.
		var record = func(chunk []byte, at int64) {
			play(at)
			if rec == nil {
				return
			} else if valid.NextSeq() != fsm.NextSeq() || valid.NextChecksum() != fsm.NextChecksum() {
				rec = nil // Deposed: its ops no longer play.
				return
			}
			var expected = rec.NextOffset()
			if err := applyAt(rec, chunk, expected); err != nil {
				t.Fatalf("recording ops the FSM applied: %v", err)
			} else if rec.NextSeq() != fsm.NextSeq() {
				t.Fatalf("recorded through seq %d, but the FSM through %d", rec.NextSeq(), fsm.NextSeq())
			}
			if at > expected {
				rec.shiftOffsets(offsetShift{at: expected, by: at - expected})
			}
		}
		// duplicate commits chunk again, if code says so.
		var duplicate = func(code byte, chunk []byte) {
			if code&0x20 == 0 {
				return
			}
			for range 1 + int(code>>4&1) {
				var at = int64(len(log))
				log = append(log, chunk...)
				play(at)
			}
		}
		var live = func(b byte) (uint64, string) {
			for p := range len(paths) {
				var name = paths[(int(b)+p)%len(paths)]
				if fn, ok := fsm.Lookup(name); ok {
					return uint64(fn), name
				}
			}
			return uint64(b), paths[int(b)%len(paths)]
		}
		for len(prog) >= 2 {
			var code, arg = prog[0], prog[1]
			prog = prog[2:]
			var c = main
			if code&0x80 != 0 && other != nil {
				c = other
			}
			var fn, name = live(arg)
			if code&0x40 != 0 {
				// Rebase a live node of main as a Recorder does; an odd arg
				// leaves it unfinished, as a recorder which fails midway.
				var size, ok = fsm.Size(Fnode(fn))
				if !ok {
					continue
				}
				main.add(t, &Op{Kind: &Op_Rebase{Rebase: &Rebase{Fnode: fn, Links: fsm.Links(Fnode(fn)), Size: size}}}, nil)
				for off := int64(0); off < size; off += 3000 {
					if arg&1 == 1 && off+3000 >= size {
						break
					}
					main.write(t, fn, off, string(bytes.Repeat([]byte{arg}, int(min(3000, size-off)))))
				}
				var at, chunk = int64(len(log)), main.take()
				log = append(log, chunk...)
				if err := applyAll(fsm, log, at, int64(len(log))); err != nil {
					t.Fatalf("rebase of live node %d: %v", fn, err)
				}
				record(chunk, at)
				duplicate(code, chunk)
				continue
			}
			switch code & 0x7 {
			case 0:
				c.add(t, create(paths[int(arg)%len(paths)]), nil)
			case 1, 2:
				c.write(t, fn, int64(arg%16)*1000, string(bytes.Repeat([]byte{arg}, int(arg)*40)))
			case 3:
				c.add(t, &Op{Kind: &Op_Link{Link: &Link{Fnode: fn, Path: paths[int(arg>>2)%len(paths)]}}}, nil)
			case 4:
				c.add(t, &Op{Kind: &Op_Unlink{Unlink: &Unlink{Fnode: fn, Path: name}}}, nil)
			case 5:
				c.add(t, &Op{Kind: &Op_Property{Property: &Property{Path: "P" + name, Content: []byte{arg}, Remove: arg&1 == 0}}}, nil)
			case 6:
				other = main.fork(Author(arg) | 0x100) // Another writer forks here.
				other.add(t, fence(), nil)
			case 7:
				if arg&1 == 0 {
					c.add(t, &Op{Kind: &Op_Fence{Fence: &Fence{}}}, nil) // Same author: a no-op.
				} else {
					// A node adopted from another log, linked once or twice.
					var links = []string{paths[int(arg>>1)%len(paths)]}
					if arg&2 != 0 {
						links = append(links, paths[int(arg>>3)%len(paths)])
					}
					c.add(t, &Op{Kind: &Op_Adopt{Adopt: &Adopt{Links: links, Source: fuzzSource(arg)}}}, nil)
				}
			}
			var next = c.take()
			var at = int64(len(log))
			log = append(log, next...)
			if c == main {
				if err := applyAll(fsm, log, at, int64(len(log))); err != nil {
					// Semantically invalid: drop the op and rewind main's chain.
					log = log[:at]
					main.seq, main.checksum = fsm.NextSeq(), fsm.NextChecksum()
					continue
				}
				record(next, at)
			} else {
				play(at)
			}
			duplicate(code, next)
		}
		checkHintedReplay(t, log)
		if recorded() {
			checkRecorderHints(t, log, rec.Hints("fuzz"))
		}
	})
}

// fuzzSource returns a node of another log to adopt, adopting one itself if
// arg says so.
func fuzzSource(arg byte) *Source {
	var src = &Source{Log: "other", Node: &LiveNode{Fnode: uint64(arg), Links: []string{"x.sst"}, Size: int64(arg) * 10,
		Segments: []*Segment{{Author: 0xB, FirstSeq: uint64(arg), FirstOffset: 10, LastSeq: uint64(arg) + 2, EndOffset: 100}}}}
	if arg&4 != 0 {
		src.Node.Source = &Source{Log: "grandparent", Node: &LiveNode{Fnode: 1, Links: []string{"y.sst"}, Size: src.Node.Size,
			Segments: []*Segment{{Author: 0xC, FirstSeq: 1, LastSeq: 1, EndOffset: 50}}}}
	}
	return src
}

// validOps returns where log holds each op of its valid history.
func validOps(log []byte) map[uint64]logRange {
	var fsm, ops = NewFSM(), make(map[uint64]logRange)
	var dec = newDecoder(bytes.NewReader(log), 0, int64(len(log)))
	var f frame
	for dec.next(&f) == nil {
		if _, err := fsm.Apply(f.op, f.opBytes, f.begin, f.end); err == nil {
			ops[f.op.Seq] = logRange{f.begin, f.end}
		} else if !errors.Is(err, ErrNotFollowing) {
			break
		}
	}
	return ops
}

// checkRecorderHints fails t unless h, the hints of a Recorder of log's
// valid history, describe its end and live nodes as the FSM of the whole log
// does, and replay from log's hinted segments and the log after them. Copies of appends lie after
// the ones they copy, which hold the ops that the segments of h bound.
func checkRecorderHints(t *testing.T, log []byte, h *Hints) {
	if err := validateHints(h); err != nil {
		t.Fatalf("recorder made invalid hints: %v", err)
	}
	var full = NewFSM()
	if err := applyAll(full, log, 0, int64(len(log))); err != nil {
		t.Fatal(err)
	}
	// The recorder may end past bytes it skips after its last op.
	var want = full.Hints("fuzz")
	if h.NextSeq != want.NextSeq || h.NextChecksum != want.NextChecksum || h.NextOffset < want.NextOffset ||
		h.NextOffset > int64(len(log)) || h.Author != want.Author || !maps.EqualFunc(h.Properties, want.Properties, bytes.Equal) {
		t.Fatalf("recorder's hints end at seq %d checksum %d offset %d author %d with properties %v; want %d %d %d %d %v",
			h.NextSeq, h.NextChecksum, h.NextOffset, h.Author, h.Properties,
			want.NextSeq, want.NextChecksum, want.NextOffset, want.Author, want.Properties)
	} else if len(h.LiveNodes) != len(want.LiveNodes) {
		t.Fatalf("recorder's hints have %d live nodes; want %d", len(h.LiveNodes), len(want.LiveNodes))
	}
	var ops = validOps(log)
	for i, ln := range h.LiveNodes {
		if w := want.LiveNodes[i]; ln.Fnode != w.Fnode || ln.Size != w.Size || !slices.Equal(ln.Links, w.Links) {
			t.Fatalf("recorder's live node %v; want %v", ln, w)
		}
		for _, s := range ln.Segments {
			if ops[s.FirstSeq].begin != s.FirstOffset || ops[s.LastSeq].end != s.EndOffset {
				t.Fatalf("recorder's segment %v of node %d, but the log holds op %d at %v and op %d at %v",
					s, ln.Fnode, s.FirstSeq, ops[s.FirstSeq], s.LastSeq, ops[s.LastSeq])
			}
		}
	}
	var hinted = NewFSM()
	hinted.beginHinted(h)
	for _, r := range hintedRanges(h) {
		hinted.resetChain(r.FirstSeq, r.FirstChecksum, r.FirstOffset, Author(r.Author))
		if err := applyAll(hinted, log, r.FirstOffset, r.EndOffset); err != nil {
			t.Fatalf("replaying recorder's hinted range %v: %v", r, err)
		} else if hinted.NextSeq() <= r.LastSeq {
			t.Fatalf("replaying recorder's hinted range %v ended at seq %d", r, hinted.NextSeq())
		}
	}
	if err := hinted.endHinted(h); err != nil {
		t.Fatalf("replaying recorder's hints: %v", err)
	} else if err = applyAll(hinted, log, h.NextOffset, int64(len(log))); err != nil || hinted.NextSeq() != h.NextSeq {
		t.Fatalf("replaying the log after the recorder's hints: %v; ended at seq %d, not %d", err, hinted.NextSeq(), h.NextSeq)
	}
}

// Interleaved writes of a WAL and a table file keep the WAL's segments
// bounded, and its hints still replay.
func TestSegmentsStayBounded(t *testing.T) {
	var c = &chain{seq: 1, author: 0xA}
	c.add(t, fence(), nil)
	c.add(t, create("wal"), nil)
	c.add(t, create("table"), nil)
	var table = string(bytes.Repeat([]byte{'t'}, 70<<10))
	for i := range 500 {
		c.write(t, 2, int64(i*10), "0123456789")
		c.write(t, 3, int64(i*len(table)), table)
	}
	var log = c.take()
	var fsm = NewFSM()
	if err := applyAll(fsm, log, 0, int64(len(log))); err != nil {
		t.Fatal(err)
	}
	for _, ln := range fsm.Hints("x").LiveNodes {
		if len(ln.Segments) > maxNodeSegments {
			t.Fatalf("node %d has %d segments", ln.Fnode, len(ln.Segments))
		}
	}
	checkHintedReplay(t, log)
}
