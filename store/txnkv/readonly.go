package txnkv

import (
	"errors"
	"fmt"

	"github.com/gazconsumer/gazconsumer/runtime"
	pb "go.gazette.dev/core/broker/protocol"
	pc "go.gazette.dev/core/consumer/protocol"
)

// ErrReadOnly is returned by the writes of a ReadOnly view.
var ErrReadOnly = errors.New("the store is read-only")

// Committed is what a store committed, read as a Base reads it: its keys
// and values, the reserved ones included, and the marshaled checkpoint of
// its last commit (nil if there was none). A Base is one.
type Committed interface {
	runtime.Reader
	Checkpoint() ([]byte, error)
}

// ReadOnly is a read-only runtime.KV of what a store committed, with the
// checkpoint committed with it: store/mem's snapshots of a DB and
// store/rocks's databases opened read-only. Its writes fail with
// ErrReadOnly, and its scans skip the reserved keys. It may be read
// concurrently if its Committed may.
type ReadOnly struct {
	name string
	c    Committed
}

var _ runtime.KV = (*ReadOnly)(nil)

// NewReadOnly returns a read-only view of c, which names the store in
// errors as name, unless name is empty.
func NewReadOnly(name string, c Committed) *ReadOnly { return &ReadOnly{name: name, c: c} }

// Checkpoint returns the checkpoint committed with the view's state, or a
// zero-valued one if there was none.
func (r *ReadOnly) Checkpoint() (pc.Checkpoint, error) { return readCheckpoint(r.name, r.c) }

// ReadThrough returns the offsets through which the view's checkpoint read
// its sources.
func (r *ReadOnly) ReadThrough() (pb.Offsets, error) {
	var cp, err = r.Checkpoint()
	if err != nil {
		return nil, err
	}
	return pc.FlattenReadThrough(cp), nil
}

// Get returns the value of key, and whether it exists.
func (r *ReadOnly) Get(key []byte) ([]byte, bool, error) {
	var v, ok, err = r.c.Get(key)
	if err != nil {
		return nil, false, storeErr(r.name, "get: %w", err)
	}
	return v, ok, nil
}

// Put fails with ErrReadOnly.
func (r *ReadOnly) Put(key, _ []byte) error { return storeErr(r.name, "put %q: %w", key, ErrReadOnly) }

// Delete fails with ErrReadOnly.
func (r *ReadOnly) Delete(key []byte) error {
	return storeErr(r.name, "delete %q: %w", key, ErrReadOnly)
}

// Scan calls fn with each key and value in [start, end) in order, until fn
// returns false. Keys with the reserved prefix are skipped.
func (r *ReadOnly) Scan(start, end []byte, fn func(key, value []byte) bool) error {
	if err := r.c.Scan(unreserved(start), end, fn); err != nil {
		return storeErr(r.name, "scan: %w", err)
	}
	return nil
}

// readCheckpoint returns the checkpoint of c, or a zero-valued one if there
// is none, naming the store in errors as name.
func readCheckpoint(name string, c Committed) (pc.Checkpoint, error) {
	var cp pc.Checkpoint
	var b, err = c.Checkpoint()
	if err != nil {
		return cp, storeErr(name, "reading checkpoint: %w", err)
	} else if b == nil {
		return cp, nil
	} else if err = cp.Unmarshal(b); err != nil {
		return cp, storeErr(name, "decoding checkpoint: %w", err)
	}
	return cp, nil
}

// storeErr formats an error of the store name, if not empty.
func storeErr(name, format string, args ...any) error {
	var err = fmt.Errorf(format, args...)
	if name == "" {
		return err
	}
	return fmt.Errorf("store %s: %w", name, err)
}

// reserved reports whether key has the reserved prefix.
func reserved(key []byte) bool { return len(key) != 0 && key[0] == ReservedPrefix }

// unreserved returns the start of a scan from start which skips the
// reserved keys.
func unreserved(start []byte) []byte {
	if len(start) == 0 || start[0] == ReservedPrefix {
		return []byte{ReservedPrefix + 1}
	}
	return start
}
