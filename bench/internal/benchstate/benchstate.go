// Package benchstate is the state that recovery benchmarks build in a store
// and check after recovering it: distinct keys with incompressible values,
// written in a fixed pseudo-random order with some rewrites. The recovery
// benchmark of gazconsumer's store (cmd/recoverybench) and the comparison of
// recoveries with Gazette's own store (cmd/bench, through cmd/ours-recovery
// and cmd/anchor-recovery) build the very same state.
package benchstate

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
)

// State describes a store's state to build: Keys distinct keys with values
// of ValueLen incompressible bytes, Put in a random order, then a fraction
// Rewrites of them Put again, in transactions of TxnLen Puts.
type State struct {
	Keys     int
	ValueLen int
	TxnLen   int
	Rewrites float64
}

// Key appends the key of i to b[:0].
func Key(b []byte, i int) []byte {
	return binary.BigEndian.AppendUint64(append(b[:0], 'k'), uint64(i))
}

// Value appends to b[:0] the value of key i: its index, then pseudo-random
// bytes seeded by it, which don't compress.
func Value(b []byte, i, n int) []byte {
	b = binary.BigEndian.AppendUint64(b[:0], uint64(i))
	var rng = rand.NewChaCha8([32]byte{0: byte(i), 1: byte(i >> 8), 2: byte(i >> 16), 3: byte(i >> 24)})
	for len(b) < n {
		b = binary.LittleEndian.AppendUint64(b, rng.Uint64())
	}
	return b[:n]
}

// Order returns the keys to Put, in order.
func (s State) Order() []int {
	var order = rand.New(rand.NewPCG(7, 11)).Perm(s.Keys)
	for i := range int(float64(s.Keys) * s.Rewrites) {
		order = append(order, order[i*7919%s.Keys])
	}
	return order
}

// Checker checks the keys and values of a recovered store, given in key
// order.
type Checker struct {
	s            State
	n            int
	wantK, wantV []byte
	err          error
}

// NewChecker returns a Checker of a store holding s.
func (s State) NewChecker() *Checker { return &Checker{s: s} }

// Next checks the next key and value, and returns whether they are right.
// It suits the callbacks of scans.
func (c *Checker) Next(key, value []byte) bool {
	c.wantK, c.wantV = Key(c.wantK, c.n), Value(c.wantV, c.n, c.s.ValueLen)
	if string(key) != string(c.wantK) || string(value) != string(c.wantV) {
		c.err = fmt.Errorf("recovered key %x (value of %d bytes) is not key #%d %x, or has another value", key, len(value), c.n, c.wantK)
		return false
	}
	c.n++
	return true
}

// Err returns the first wrong key or value, or whether keys are missing.
func (c *Checker) Err() error {
	if c.err == nil && c.n != c.s.Keys {
		c.err = fmt.Errorf("recovered %d keys, want %d", c.n, c.s.Keys)
	}
	return c.err
}
