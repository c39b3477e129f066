package runtime

import (
	"bytes"
	"errors"
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
	// BeginLoad begins a load of rows to the database of a store which
	// has committed nothing yet. One load at a time.
	BeginLoad() (Loading, error)
}

// Loading is a load begun by a Loader. The rows added are written aside
// (rocks.Store: to a table file, recorded as it's written) until Finish
// hands them to the database, whose next commit makes them durable with
// it; Abort drops them. A fork adds its rows as it reads its parent's
// state, and finishes once what it read is durable. Loaded again, the same
// rows replace those before.
type Loading interface {
	// Add adds a row, of a key greater than the last's. It fails on a key
	// out of order.
	Add(key, value []byte) error
	// Finish hands the rows to the database, and returns their count. It
	// aborts the load if it fails.
	Finish() (int, error)
	// Abort ends the load without handing its rows to the database. It
	// does nothing once the load ended.
	Abort()
}

// LoadRows loads rows, of strictly increasing keys, through a load of l
// (see Loader), and returns their count. It aborts the load if one fails.
func LoadRows(l Loader, rows iter.Seq2[[]byte, []byte]) (int, error) {
	var load, err = l.BeginLoad()
	if err != nil {
		return 0, err
	}
	for key, value := range rows {
		if err = load.Add(key, value); err != nil {
			load.Abort()
			return 0, err
		}
	}
	return load.Finish()
}

// forkRows holds the rows a fork keeps, copied into one buffer, until they
// are loaded into its store in the order of their keys. They're added in
// runs, each in the order of its keys (those of a Scan).
type forkRows struct {
	buf  []byte
	rows []forkRow
	runs []int // Index in rows of each run's first row.
}

// forkRow is a row of forkRows: its key is buf[begin:mid], its value
// buf[mid:end].
type forkRow struct{ begin, mid, end int }

// run begins the next run of rows.
func (f *forkRows) run() { f.runs = append(f.runs, len(f.rows)) }

// add adds a row to the current run, of a key after its last.
func (f *forkRows) add(key, value []byte) {
	var begin = len(f.buf)
	f.buf = append(append(f.buf, key...), value...)
	f.rows = append(f.rows, forkRow{begin, begin + len(key), len(f.buf)})
}

func (f *forkRows) key(r forkRow) []byte   { return f.buf[r.begin:r.mid] }
func (f *forkRows) value(r forkRow) []byte { return f.buf[r.mid:r.end] }

// sorted orders the rows by key, merging its runs, and drops the second of
// a row read twice (a fork reads a row its parent moves as it reads twice,
// alike). It fails on a key read twice with two values.
func (f *forkRows) sorted() error {
	var cmp = func(a, b forkRow) int { return bytes.Compare(f.key(a), f.key(b)) }
	// Runs merge pairwise, a pass halving them: run i is
	// rows[bounds[i]:bounds[i+1]].
	var bounds = []int{0}
	for _, r := range f.runs {
		if r > bounds[len(bounds)-1] && r < len(f.rows) {
			bounds = append(bounds, r)
		}
	}
	bounds = append(bounds, len(f.rows))
	var src, dst = f.rows, make([]forkRow, len(f.rows))
	for len(bounds) > 2 {
		var next = []int{0}
		for i := 0; i+1 < len(bounds); i += 2 {
			var lo, mid, hi = bounds[i], bounds[i+1], bounds[i+1]
			if i+2 < len(bounds) {
				hi = bounds[i+2]
			}
			mergeRows(dst[lo:hi], src[lo:mid], src[mid:hi], cmp)
			next = append(next, hi)
		}
		src, dst, bounds = dst, src, next
	}
	f.rows, f.runs = src, nil
	if !slices.IsSortedFunc(f.rows, cmp) {
		return errors.New("the rows of a run are out of order") // A bug of its caller.
	}
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

// mergeRows merges a and b, each ordered by cmp, into dst (of their length).
func mergeRows(dst, a, b []forkRow, cmp func(a, b forkRow) int) {
	var i, j, k int
	for ; i < len(a) && j < len(b); k++ {
		if cmp(b[j], a[i]) < 0 {
			dst[k], j = b[j], j+1
		} else {
			dst[k], i = a[i], i+1
		}
	}
	k += copy(dst[k:], a[i:])
	copy(dst[k:], b[j:])
}
