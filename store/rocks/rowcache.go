package rocks

import (
	"bytes"
	"encoding/binary"
	"math"
	"sync"
	"sync/atomic"

	"github.com/gazconsumer/gazconsumer/store/txnkv"
)

// rowCache holds values of keys as the database has them after the last
// settled commit, and keys known to be absent from it, so that a Get of a
// key read or written recently needs no call into RocksDB (a cgo call and a
// memtable and block lookup: some microseconds, against tens of nanoseconds
// for a map).
//
// It's a generational cache, an approximation of LRU without a list: keys
// enter the current generation; when that holds half the capacity, it
// becomes the previous generation and the one before is dropped. A hit in
// the previous generation moves the key to the current one. So a key read or
// written within the last half-capacity of traffic is always cached.
//
// A generation holds no pointers for the garbage collector to trace (a
// cache of a large key space holds hundreds of thousands of rows, which the
// collector would scan on every cycle): rows are copied into one byte
// arena, each a header of its lengths followed by its key and value, and a
// map from a hash of the key to the row's place in it finds them. A lookup
// reads a Bloom filter of the generation's keys, which answers most lookups
// of keys the generation doesn't have, then the map, then the row's header
// and key, most often from one line of the processor's cache: on a large
// key space, where most lookups miss the processor's caches, a row's
// lengths kept apart from its key would cost another miss. A key is hashed once for both generations, by
// the hash of the store's overlays (txnkv.HashKey), which the store
// computed already to look the key up in them. Two keys of the
// same hash (one chance in 2^64) share a slot: a lookup compares the key,
// and a key displaced by another is no longer cached.
//
// The cache is used by the shard's goroutine only. A value it returns is
// valid until the cache is next written (a put or commit, or a get of a key
// of the previous generation, which moves it).
//
// A cache of a shared budget (see Budget) takes its capacity from the
// budget's rowShare whenever it starts a generation: the budget split
// evenly among the caches of open stores.
type rowCache struct {
	cur, prev *generation
	half      int   // Bytes of a generation.
	reserve   int32 // Bytes an absent row reserves for a value: see put.

	share    *rowShare // Of the budget, if the cache has no capacity of its own.
	reported int64     // Bytes last added to share's usage.
}

// rowShare is the row-cache budget of the stores of a Budget, split evenly
// among the caches of the stores open.
type rowShare struct {
	total  int64
	mu     sync.Mutex
	caches int
	half   atomic.Int64 // Bytes of a generation of each cache.
	used   atomic.Int64 // Bytes the caches account, as of their last commit.
}

// newSharedRowCache returns a cache of a share of budget, or nil (no
// cache) if the budget is not positive. Its close returns the share.
func newSharedRowCache(budget *rowShare) *rowCache {
	if budget.total <= 0 {
		return nil
	}
	budget.mu.Lock()
	budget.caches++
	budget.half.Store(budget.total / int64(budget.caches) / 2)
	budget.mu.Unlock()
	var c = newRowCache(2 * budget.half.Load())
	c.share = budget
	return c
}

// close returns the cache's share of its budget, if it has one; the cache
// is not used after.
func (c *rowCache) close() {
	if c == nil || c.share == nil {
		return
	}
	var b = c.share
	b.mu.Lock()
	b.caches--
	if b.caches > 0 {
		b.half.Store(b.total / int64(b.caches) / 2)
	}
	b.mu.Unlock()
	b.used.Add(-c.reported)
	c.reported = 0
}

// report adds the change of the cache's bytes to its budget's usage.
func (c *rowCache) report() {
	if c.share == nil {
		return
	}
	var n = int64(c.cur.bytes + c.prev.bytes)
	c.share.used.Add(n - c.reported)
	c.reported = n
}

// maxReserve bounds the bytes an absent row reserves for its value.
const maxReserve = 128

// generation is one generation of a rowCache.
type generation struct {
	slots  map[uint64]int // Offset in arena of the row of a key's hash.
	filter []uint64       // Bits of the hashes of slots: see mayHave.
	arena  arena          // Rows: see rowHeader.
	rows   int            // Rows added to arena, those displaced since too.
	bytes  int            // Accounted bytes of rows, rewritten ones included.
}

// minFilterWords is the fewest words of a generation's filter.
const minFilterWords = 16

// A row of a generation's arena is a header of rowHeader bytes, then its
// key, then its value (or nothing, for the value's absence from the
// database) in vcap bytes, of which vlen are the value's: a rewrite no
// longer than the first takes its place. The header holds, little-endian,
// the key's length (uint32), vlen (uint32), vcap (uint32), and whether the
// value is absent (a byte, then three bytes unused).
const (
	rowHeader  = 16
	rowVlen    = 4
	rowVcap    = 8
	rowAbsent  = 12
	maxRowSize = math.MaxUint32 // Of a key or a value's room.
)

// cachedRow is a key's value in the database, or its absence.
type cachedRow struct {
	value  []byte
	absent bool
}

// rowOverhead approximates the memory of a cached row beside its key and
// value: its map entry and its header (rowHeader).
const rowOverhead = 48

// newRowCache returns a cache of about capacity bytes, or nil (no cache) if
// capacity is not positive.
func newRowCache(capacity int64) *rowCache {
	if capacity <= 0 {
		return nil
	}
	return &rowCache{cur: newGeneration(), prev: newGeneration(), half: int(capacity / 2)}
}

func newGeneration() *generation {
	return &generation{slots: make(map[uint64]int), filter: make([]uint64, minFilterWords)}
}

// mayHave reports whether g may have a row of a key of hash h: a Bloom
// filter of two bits a key, at least eight bits a key in all, which answers
// a lookup of most keys g doesn't have from memory a sixteenth of its
// map's, which a lookup of a large generation would mostly miss in the
// processor's caches (on a large key space, most keys a Prefetch looks up
// are in neither generation). Bits of rows deleted since stay set, which
// costs such keys' lookups only a look at the map.
func (g *generation) mayHave(h uint64) bool {
	var mask = uint64(len(g.filter))*64 - 1
	var a, b = h & mask, (h >> 32) & mask
	return g.filter[a/64]&(1<<(a%64)) != 0 && g.filter[b/64]&(1<<(b%64)) != 0
}

// setFilter sets the bits of h in g's filter, which it makes again, twice
// as large, from the hashes of slots, whenever they fill it past eight bits
// a key.
func (g *generation) setFilter(h uint64) {
	if n := len(g.slots); len(g.filter)*64 < 8*n {
		var words = len(g.filter)
		for words*64 < 8*n {
			words *= 2
		}
		g.filter = make([]uint64, words)
		for h := range g.slots {
			g.setBits(h)
		}
		return
	}
	g.setBits(h)
}

// setBits sets the two bits of h in g's filter.
func (g *generation) setBits(h uint64) {
	var mask = uint64(len(g.filter))*64 - 1
	var a, b = h & mask, (h >> 32) & mask
	g.filter[a/64] |= 1 << (a % 64)
	g.filter[b/64] |= 1 << (b % 64)
}

// find returns the offset of key's row in g's arena, or -1.
func (g *generation) find(h uint64, key []byte) int {
	if !g.mayHave(h) {
		return -1
	}
	var off, ok = g.slots[h]
	if !ok {
		return -1
	}
	var row = g.arena.at(off)
	if !bytes.Equal(row[rowHeader:rowHeader+int(binary.LittleEndian.Uint32(row))], key) {
		return -1
	}
	return off
}

// row returns the row at offset off.
func (g *generation) row(off int) cachedRow {
	var row = g.arena.at(off)
	var v = rowHeader + int(binary.LittleEndian.Uint32(row))
	var n = int(binary.LittleEndian.Uint32(row[rowVlen:]))
	return cachedRow{value: row[v : v+n : v+n], absent: row[rowAbsent] != 0}
}

// rewrite sets the value of the row at offset off, which has room for it,
// and reports whether it had.
func (g *generation) rewrite(off int, value []byte, absent bool) bool {
	var hdr = g.arena.at(off)
	if len(value) > int(binary.LittleEndian.Uint32(hdr[rowVcap:])) {
		return false
	}
	copy(hdr[rowHeader+int(binary.LittleEndian.Uint32(hdr)):], value)
	binary.LittleEndian.PutUint32(hdr[rowVlen:], uint32(len(value)))
	hdr[rowAbsent] = 0
	if absent {
		hdr[rowAbsent] = 1
	}
	return true
}

// add appends the row of key to g, with room for a value of vcap bytes
// (no fewer than value's, and at most maxRowSize, as key's length), and
// returns its offset.
func (g *generation) add(h uint64, key, value []byte, vcap int, absent bool) int {
	// The header and key are written before the value is copied: see
	// getHashed.
	var off, row = g.arena.alloc(rowHeader + len(key) + vcap)
	binary.LittleEndian.PutUint32(row, uint32(len(key)))
	binary.LittleEndian.PutUint32(row[rowVlen:], uint32(len(value)))
	binary.LittleEndian.PutUint32(row[rowVcap:], uint32(vcap))
	clear(row[rowAbsent:rowHeader])
	if absent {
		row[rowAbsent] = 1
	}
	copy(row[rowHeader:], key)
	copy(row[rowHeader+len(key):], value)
	g.slots[h] = off // Displacing a row of another key of the same hash, if any.
	g.setFilter(h)
	g.rows++
	g.bytes += len(key) + vcap + rowOverhead
	return off
}

// reset empties g, keeping its memory.
func (g *generation) reset() {
	clear(g.slots)
	clear(g.filter)
	g.arena.reset()
	g.rows, g.bytes = 0, 0
}

// get returns the cached row of key, if the cache has one.
func (c *rowCache) get(key []byte) (cachedRow, bool) {
	return c.getHashed(key, txnkv.HashKey(key))
}

// getHashed is get of key, whose hash (txnkv.HashKey) is h.
func (c *rowCache) getHashed(key []byte, h uint64) (cachedRow, bool) {
	if c == nil {
		return cachedRow{}, false
	}
	if i := c.cur.find(h, key); i >= 0 {
		return c.cur.row(i), true
	}
	var i = c.prev.find(h, key)
	if i < 0 {
		return cachedRow{}, false
	}
	// Move it to the current generation: r's bytes stay in the previous
	// generation's arena, which add copies them from.
	var r = c.prev.row(i)
	delete(c.prev.slots, h)
	if g := c.generationFor(len(key) + len(r.value) + rowOverhead); g != nil {
		// The previous generation may have just been reset to become the
		// current one: r's bytes are then in its arena, whose first chunk
		// add reuses from its start. It writes the new row's header and
		// key (r's key) there, before r's value, which it then copies
		// (a memmove) to its place at or before where it was.
		return g.row(g.add(h, key, r.value, len(r.value), r.absent)), true
	}
	return r, true
}

// generationFor returns the current generation with room for n more bytes,
// starting a new one if need be, or nil if n is larger than a generation.
func (c *rowCache) generationFor(n int) *generation {
	if c.share != nil {
		c.half = int(c.share.half.Load())
	}
	if n > c.half || n > maxRowSize {
		return nil // Headers hold lengths as uint32s.
	}
	if c.cur.bytes+n > c.half {
		if c.share != nil && c.prev.arena.held > 2*c.half {
			// The share shrank since the generation grew: free its memory.
			// (A row just read from it stays valid: see get.)
			c.prev = newGeneration()
		} else {
			c.prev.reset()
		}
		c.prev, c.cur = c.cur, c.prev
	}
	return c.cur
}

// put caches the row of key, which the database holds. A row of an
// absent key reserves room for a value as long as the last one put (at
// most maxReserve bytes): a key is most often found absent by a
// transaction which then writes it, and its commit rewrites the row in
// place.
func (c *rowCache) put(key, value []byte, absent bool) {
	c.putHashed(key, txnkv.HashKey(key), value, absent)
}

// putHashed is put of key, whose hash (txnkv.HashKey) is h.
func (c *rowCache) putHashed(key []byte, h uint64, value []byte, absent bool) {
	if c == nil {
		return
	}
	if off := c.cur.find(h, key); off >= 0 {
		if c.cur.rewrite(off, value, absent) {
			// Rewritten in place: the generation accounts the row's bytes
			// as they were.
			c.noteLen(len(value), absent)
			return
		}
		delete(c.cur.slots, h)
	} else if c.prev.find(h, key) >= 0 {
		delete(c.prev.slots, h)
	}
	c.addHashed(key, h, value, absent)
}

// addHashed is putHashed of key, whose hash is h, which the cache holds in
// neither generation: it adds the row without looking for it. A Prefetch
// adds so the rows of the keys it found in neither and read from the
// database.
func (c *rowCache) addHashed(key []byte, h uint64, value []byte, absent bool) {
	if c == nil {
		return
	}
	var vcap = len(value)
	if absent {
		vcap = max(vcap, int(c.reserve))
	}
	if g := c.generationFor(len(key) + vcap + rowOverhead); g != nil {
		g.add(h, key, value, vcap, absent)
	}
	c.noteLen(len(value), absent)
}

// noteLen notes the length of a value put.
func (c *rowCache) noteLen(n int, absent bool) {
	if !absent {
		c.reserve = int32(min(n, maxReserve))
	}
}

// commit updates the cache with the writes of an overlay, now in the
// database.
func (c *rowCache) commit(o *txnkv.Overlay) {
	if c == nil {
		return
	}
	o.EachHashed(func(e *txnkv.Entry, h uint64) { c.putHashed(e.Key, h, e.Value, e.Deleted) })
	c.report()
}

// clear drops every cached row.
func (c *rowCache) clear() {
	if c == nil {
		return
	}
	c.cur.reset()
	c.prev.reset()
	c.report()
}
