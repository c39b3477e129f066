package recoverylog

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"testing"

	"google.golang.org/protobuf/proto"
)

// applyAll decodes and applies the frames of log[from:to] to fsm, until the
// end or the first invalid frame or op.
func applyAll(fsm *FSM, log []byte, from, to int64) error {
	var dec = newDecoder(bytes.NewReader(log[from:to]), from, to-from)
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
	f.Add(c.take())
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

// FuzzFSMOps builds logs of well-framed ops, chained or forked, from
// arbitrary program bytes, and checks replay from their hints.
func FuzzFSMOps(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12})
	f.Add([]byte{0, 0, 0, 1, 1, 1, 2, 2, 3, 3, 3, 7, 7, 7, 8, 9, 1, 1, 0, 0})
	f.Add(bytes.Repeat([]byte{0, 17, 1, 33, 1, 200, 4, 3}, 40))
	// Rebases, complete and not, among writes, links and unlinks.
	f.Add([]byte{0, 0, 1, 9, 0, 1, 2, 5, 0x40, 0, 1, 7, 3, 4, 0x40, 1, 0x40, 4, 2, 8, 4, 0, 0x40, 0, 1, 1})

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
				var at = int64(len(log))
				log = append(log, main.take()...)
				if err := applyAll(fsm, log, at, int64(len(log))); err != nil {
					t.Fatalf("rebase of live node %d: %v", fn, err)
				}
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
				c.add(t, &Op{Kind: &Op_Fence{Fence: &Fence{}}}, nil) // Same author: a no-op.
			}
			var next = c.take()
			var at = int64(len(log))
			log = append(log, next...)
			if c == main {
				if err := applyAll(fsm, log, at, int64(len(log))); err != nil {
					// Semantically invalid: drop the op and rewind main's chain.
					log = log[:at]
					main.seq, main.checksum = fsm.NextSeq(), fsm.NextChecksum()
				}
			}
		}
		checkHintedReplay(t, log)
	})
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
