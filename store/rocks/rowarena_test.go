package rocks

import (
	"bytes"
	"testing"
)

// FuzzArena allocates rows of sizes a program gives (some larger than a
// chunk), fills each with a byte of its own, and resets the arena now and
// then: every row allocated since the last reset must keep its bytes, and
// the arena must account what it holds and uses. (A row written over by a
// later one stays so: the rows are checked before each reset and at the
// end, not after every allocation, which would be quadratic in bytes.)
func FuzzArena(f *testing.F) {
	f.Add([]byte{1, 2, 3, 0xff, 4, 0, 5, 0xfe, 6})
	f.Add([]byte{0xfe, 0xfe, 0, 0xfe, 10, 0xff, 0xfe})
	f.Add(bytes.Repeat([]byte{200}, 64))
	f.Fuzz(func(t *testing.T, program []byte) {
		if len(program) > 128 {
			program = program[:128] // At most about 128 MiB of rows.
		}
		var a arena
		type row struct {
			op, off, n int
		}
		var rows []row
		var check = func(i int) {
			var used = 0
			for _, r := range rows {
				var got = a.at(r.off)
				if len(got) < r.n || bytes.Count(got[:r.n], []byte{byte(r.op)}) != r.n {
					t.Fatalf("op %d: the row of op %d (offset %#x, %d bytes) was overwritten", i, r.op, r.off, r.n)
				}
				used += r.n
			}
			var held = 0
			for _, c := range a.chunks {
				held += cap(c)
			}
			if a.used() != used || a.held != held {
				t.Fatalf("op %d: arena accounts %d bytes used, %d held; rows use %d, chunks hold %d", i, a.used(), a.held, used, held)
			}
		}
		for i, op := range program {
			var n int
			switch op {
			case 0: // Reset.
				check(i)
				a.reset()
				rows = rows[:0]
				continue
			case 0xff: // A row larger than a chunk.
				n = maxChunk + i
			case 0xfe: // A row of most of a chunk.
				n = maxChunk - 3*i
			default:
				n = int(op) * 97
			}
			var off, b = a.alloc(n)
			if len(b) != n || cap(b) != n {
				t.Fatalf("op %d: alloc(%d) gave %d bytes of room, capacity %d", i, n, len(b), cap(b))
			}
			for j := range b {
				b[j] = byte(i)
			}
			rows = append(rows, row{i, off, n})
		}
		check(len(program))
	})
}

// TestArenaReusesItsChunks checks that an arena filled again after a reset
// takes no more memory.
func TestArenaReusesItsChunks(t *testing.T) {
	var a arena
	for range 3 {
		a.reset()
		for range 20_000 {
			a.alloc(1_040)
		}
		if a.held > 2*a.used() {
			t.Fatalf("arena holds %d bytes for %d used", a.held, a.used())
		}
	}
	var held = a.held
	a.reset()
	for range 20_000 {
		a.alloc(1_040)
	}
	if a.held != held {
		t.Fatalf("arena filled again after a reset holds %d bytes, held %d before", a.held, held)
	}
}
