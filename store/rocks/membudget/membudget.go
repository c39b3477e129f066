// Package membudget sizes the memory that a member's RocksDB stores share:
// one block cache, the memtables charged to it, and the stores' row caches,
// all within one budget. It is the configuration only, without cgo, so that
// runconsumer parses a member's flags into it without linking RocksDB;
// package rocks builds the caches from it (rocks.NewBudget,
// rocks.MemberBudget).
//
// A budget of Bytes is split as
//
//	row caches   = Bytes × RowCacheShare     (Go heap; split evenly among the open stores)
//	block cache  = Bytes − row caches        (RocksDB, shared by every store)
//	memtables    ≤ Bytes × WriteBufferShare  (charged to the block cache, not beside it)
//
// and each store's memtable (its write buffer) is write buffers over the
// stores open, or over Shards when more are open, within
// [MinMemtableBytes, MaxMemtableBytes]: a member running fewer shards than
// Shards gives each larger memtables (flushed less often, into fewer and
// larger files, which RocksDB compacts less often).
package membudget

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
)

// Flags and environment variables of a member's Config, as runconsumer
// registers them.
const (
	FlagBytes            = "rocksdb.memory-budget"
	EnvBytes             = "ROCKSDB_MEMORY_BUDGET"
	FlagWriteBufferShare = "rocksdb.write-buffer-share"
	EnvWriteBufferShare  = "ROCKSDB_WRITE_BUFFER_SHARE"
	FlagRowCacheShare    = "rocksdb.row-cache-share"
	EnvRowCacheShare     = "ROCKSDB_ROW_CACHE_SHARE"
	FlagShards           = "rocksdb.shards"
	EnvShards            = "ROCKSDB_SHARDS"
)

// Defaults of a Config: 1 GiB in all, for a member of 16 shards in a
// container of 2 GiB (the rest is for the Go heap beside the row caches,
// and RocksDB's memory outside its block cache).
const (
	DefaultBytes            Size    = 1 << 30
	DefaultWriteBufferShare float64 = 0.25
	DefaultRowCacheShare    float64 = 0.25
	DefaultShards                   = 16
)

// Bounds of a Config and of a store's memtable.
const (
	// MinBytes is the smallest budget.
	MinBytes Size = 32 << 20
	// MinMemtableBytes and MaxMemtableBytes bound the memtable of a store
	// (RocksDB's write_buffer_size).
	MinMemtableBytes = 1 << 20
	MaxMemtableBytes = 64 << 20
)

// Config is the memory budget of a member's stores.
type Config struct {
	// Bytes is the whole budget.
	Bytes Size
	// WriteBufferShare is the fraction of Bytes that the stores'
	// memtables may take together, charged to the block cache: past it,
	// RocksDB flushes memtables.
	WriteBufferShare float64
	// RowCacheShare is the fraction of Bytes of the stores' row caches,
	// split evenly among the stores open; zero disables them.
	RowCacheShare float64
	// Shards is how many shards a member runs at most in normal
	// operation: each store's memtable is at least the memtables' budget
	// over Shards (MemtableBytes). Running more is safe: the budget of the
	// memtables and of the row caches holds regardless.
	Shards int
}

// Default returns the default Config.
func Default() Config {
	return Config{Bytes: DefaultBytes, WriteBufferShare: DefaultWriteBufferShare, RowCacheShare: DefaultRowCacheShare, Shards: DefaultShards}
}

// Validate reports each field of c out of range, naming its flag and
// environment variable.
func (c Config) Validate() error {
	var errs []error
	if c.Bytes < MinBytes {
		errs = append(errs, fmt.Errorf("--%s (env %s) is %s: it must be at least %s", FlagBytes, EnvBytes, c.Bytes, MinBytes))
	}
	if !(c.WriteBufferShare > 0 && c.WriteBufferShare < 1) {
		errs = append(errs, fmt.Errorf("--%s (env %s) is %v: it must be above 0 and below 1", FlagWriteBufferShare, EnvWriteBufferShare, c.WriteBufferShare))
	}
	if !(c.RowCacheShare >= 0 && c.RowCacheShare < 1) {
		errs = append(errs, fmt.Errorf("--%s (env %s) is %v: it must be at least 0 and below 1", FlagRowCacheShare, EnvRowCacheShare, c.RowCacheShare))
	} else if c.WriteBufferShare+c.RowCacheShare >= 0.9 {
		errs = append(errs, fmt.Errorf("--%s (%v) and --%s (%v) leave %.0f%% of the budget to cache data blocks: together they must stay below 0.9",
			FlagWriteBufferShare, c.WriteBufferShare, FlagRowCacheShare, c.RowCacheShare, 100*(1-c.WriteBufferShare-c.RowCacheShare)))
	}
	if c.Shards < 1 {
		errs = append(errs, fmt.Errorf("--%s (env %s) is %d: it must be at least 1", FlagShards, EnvShards, c.Shards))
	}
	return errors.Join(errs...)
}

// RowCacheBytes is the budget of the row caches of all stores.
func (c Config) RowCacheBytes() int64 { return int64(float64(c.Bytes) * c.RowCacheShare) }

// BlockCacheBytes is the capacity of the shared block cache: the budget
// but for the row caches. Memtables are charged to it.
func (c Config) BlockCacheBytes() int64 { return int64(c.Bytes) - c.RowCacheBytes() }

// WriteBufferBytes is the budget of all stores' memtables.
func (c Config) WriteBufferBytes() int64 { return int64(float64(c.Bytes) * c.WriteBufferShare) }

// MemtableBytes is the size of a store's memtable while Shards stores or
// more are open: the write buffers' budget over Shards, within
// [MinMemtableBytes, MaxMemtableBytes].
func (c Config) MemtableBytes() int64 { return c.MemtableBytesOf(c.Shards) }

// MemtableBytesOf is the size of a store's memtable while stores are open:
// the write buffers' budget over stores, or over Shards if more are open,
// within [MinMemtableBytes, MaxMemtableBytes].
func (c Config) MemtableBytesOf(stores int) int64 {
	var n = int64(max(min(stores, c.Shards), 1))
	return min(max(c.WriteBufferBytes()/n, MinMemtableBytes), MaxMemtableBytes)
}

// Size is a number of bytes, which parses from and formats to a plain
// integer or one with a binary suffix: Ki, Mi, Gi, Ti (or KiB, MiB, GiB,
// TiB), as Kubernetes' quantities of memory, such as 1Gi or 1.5Gi. It
// implements flag.Value.
type Size int64

// sizeUnits are the suffixes of a Size, largest first.
var sizeUnits = []struct {
	suffix string
	bytes  int64
}{{"Ti", 1 << 40}, {"Gi", 1 << 30}, {"Mi", 1 << 20}, {"Ki", 1 << 10}}

// ParseSize parses a Size.
func ParseSize(s string) (Size, error) {
	var num, mult = strings.TrimSpace(s), int64(1)
	num = strings.TrimSuffix(num, "B")
	for _, u := range sizeUnits {
		if n, ok := strings.CutSuffix(num, u.suffix); ok {
			num, mult = n, u.bytes
			break
		}
	}
	if n, err := strconv.ParseInt(num, 10, 64); err == nil && n >= 0 && n <= math.MaxInt64/mult {
		return Size(n * mult), nil
	}
	var f, err = strconv.ParseFloat(num, 64)
	if err != nil || !(f >= 0 && f*float64(mult) < math.MaxInt64) {
		return 0, fmt.Errorf("%q is not a size (a number of bytes, or with a suffix Ki, Mi, Gi or Ti, such as 512Mi or 1.5Gi)", s)
	}
	return Size(f * float64(mult)), nil
}

// String formats s with the largest suffix that divides it.
func (s Size) String() string {
	for _, u := range sizeUnits {
		if s != 0 && int64(s)%u.bytes == 0 {
			return strconv.FormatInt(int64(s)/u.bytes, 10) + u.suffix
		}
	}
	return strconv.FormatInt(int64(s), 10)
}

// Set parses v into s: it implements flag.Value.
func (s *Size) Set(v string) error {
	var n, err = ParseSize(v)
	if err != nil {
		return err
	}
	*s = n
	return nil
}

// member is the Config of the process's member, set by SetMember.
var member struct {
	sync.Mutex
	cfg       Config
	set, used bool
}

// ErrMemberInUse is returned by SetMember when the member's budget is
// already built with another Config.
var ErrMemberInUse = errors.New("the member's memory budget is already in use with another configuration")

// SetMember sets the Config of the process's member, which its stores
// share (see rocks.MemberBudget): runconsumer sets it from its flags before
// it builds the application. Once Member has been read, c must equal it.
func SetMember(c Config) error {
	if err := c.Validate(); err != nil {
		return err
	}
	member.Lock()
	defer member.Unlock()
	if member.used && member.cfg != c {
		return fmt.Errorf("%w (%+v, not %+v)", ErrMemberInUse, member.cfg, c)
	}
	member.cfg, member.set = c, true
	return nil
}

// Member returns the Config that SetMember set, or Default. Once it has
// been read, SetMember can no longer change it.
func Member() Config {
	member.Lock()
	defer member.Unlock()
	if !member.set {
		member.cfg, member.set = Default(), true
	}
	member.used = true
	return member.cfg
}
