package recoverylog

import (
	"bytes"
	"context"
	"hash/crc32"
	"os"
	"path/filepath"
	"testing"

	"go.gazette.dev/core/broker/client"
	pb "go.gazette.dev/core/broker/protocol"
)

// chain builds framed ops of one author, chained from a given point.
type chain struct {
	seq      uint64
	checksum uint32
	author   Author
	log      []byte
}

func (c *chain) add(t testing.TB, op *Op, data []byte) {
	t.Helper()
	op.Seq, op.Checksum, op.Author = c.seq, c.checksum, uint32(c.author)
	var buf, opBytes, err = appendFrame(nil, op, data)
	if err != nil {
		t.Fatal(err)
	}
	c.seq++
	c.checksum = crc32.Update(c.checksum, castagnoli, opBytes)
	c.log = append(c.log, buf...)
}

func (c *chain) fork(author Author) *chain {
	return &chain{seq: c.seq, checksum: c.checksum, author: author}
}

func (c *chain) take() []byte {
	var b = c.log
	c.log = nil
	return b
}

func (c *chain) write(t testing.TB, fn uint64, offset int64, data string) {
	c.add(t, &Op{Kind: &Op_Write{Write: &Write{
		Fnode: fn, Offset: offset, Length: int64(len(data)), DataCrc32C: crc32Of([]byte(data))}}}, []byte(data))
}

func create(path string) *Op { return &Op{Kind: &Op_Create{Create: &Create{Path: path}}} }
func fence() *Op             { return &Op{Kind: &Op_Fence{Fence: &Fence{}}} }

// forkedLog returns a log in which writer B forks A's history, and a foreign
// writer F appends ops; only A's history is valid.
func forkedLog(t testing.TB) []byte {
	var a = &chain{seq: 1, author: 0xA}
	a.add(t, fence(), nil)
	a.add(t, create("one"), nil) // Fnode 2.
	a.write(t, 2, 0, "hello ")
	var b = a.fork(0xB) // B read through seq 3, then raced A.
	a.write(t, 2, 6, "world")
	var log = a.take()

	b.add(t, fence(), nil) // Takes seq 4, already A's: dead branch.
	b.add(t, create("two"), nil)
	b.write(t, 5, 0, "from B")
	log = append(log, b.take()...)

	var f = a.fork(0xF) // A foreign author continuing A's chain, without a fence.
	f.add(t, create("three"), nil)
	log = append(log, f.take()...)

	a.write(t, 2, 11, "!")
	return append(log, a.take()...)
}

func TestForkedHistoryIsSkipped(t *testing.T) {
	var journal = newLog(t)
	if _, err := client.Append(context.Background(), stack.Journals(),
		pb.AppendRequest{Journal: journal}, bytes.NewReader(forkedLog(t))); err != nil {
		t.Fatal(err)
	}
	var fsm, dir, _ = play(t, journal, nil, 0xC)
	var entries, _ = os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("played %d files; want only A's", len(entries))
	}
	if b, err := os.ReadFile(filepath.Join(dir, "one")); err != nil || string(b) != "hello world!" {
		t.Fatalf("played one = %q, %v", b, err)
	}
	if fsm.Author() != 0xC || fsm.NextSeq() != 7 {
		t.Fatalf("after fencing: author %s, next seq %d", fsm.Author(), fsm.NextSeq())
	}
}
