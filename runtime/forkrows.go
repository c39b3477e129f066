package runtime

import (
	"bytes"
	"fmt"
	"iter"
	"slices"
)

// Loader is implemented by stores which write many rows to a new store's
// database at once, more cheaply than the Puts of a transaction can
// (rocks.Store does, as one table file the database ingests). A new shard of
// a rescale loads the rows it keeps of its parent's state so, then commits
// its checkpoint.
type Loader interface {
	// Load writes rows, of strictly increasing keys, to the database of a
	// store which has committed nothing yet; its next commit makes them
	// durable with it. Loaded again, the same rows replace those before.
	// It returns the count of rows written.
	Load(rows iter.Seq2[[]byte, []byte]) (int, error)
}

// forkRows holds the rows a fork keeps, copied into one buffer, until they
// are loaded into its store in the order of their keys.
type forkRows struct {
	buf  []byte
	rows []forkRow
}

// forkRow is a row of forkRows: its key is buf[begin:mid], its value
// buf[mid:end].
type forkRow struct{ begin, mid, end int }

func (f *forkRows) add(key, value []byte) {
	var begin = len(f.buf)
	f.buf = append(append(f.buf, key...), value...)
	f.rows = append(f.rows, forkRow{begin, begin + len(key), len(f.buf)})
}

func (f *forkRows) key(r forkRow) []byte   { return f.buf[r.begin:r.mid] }
func (f *forkRows) value(r forkRow) []byte { return f.buf[r.mid:r.end] }

// sorted orders the rows by key and drops the second of a row read twice
// (a fork reads a row its parent moves as it reads twice, alike). It fails
// on a key read twice with two values.
func (f *forkRows) sorted() error {
	slices.SortFunc(f.rows, func(a, b forkRow) int { return bytes.Compare(f.key(a), f.key(b)) })
	var out = f.rows[:0]
	for _, r := range f.rows {
		if n := len(out); n != 0 && bytes.Equal(f.key(out[n-1]), f.key(r)) {
			if !bytes.Equal(f.value(out[n-1]), f.value(r)) {
				return fmt.Errorf("key %x was read twice, with two values (%x and %x)", f.key(r), f.value(out[n-1]), f.value(r))
			}
			continue
		}
		out = append(out, r)
	}
	f.rows = out
	return nil
}

// all yields the rows in their order.
func (f *forkRows) all() iter.Seq2[[]byte, []byte] {
	return func(yield func(key, value []byte) bool) {
		for _, r := range f.rows {
			if !yield(f.key(r), f.value(r)) {
				return
			}
		}
	}
}
