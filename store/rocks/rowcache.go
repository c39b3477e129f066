package rocks

import (
	"unsafe"

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
// The cache is used by the shard's goroutine only. The values it holds are
// shared with committed overlays and the database reads which filled them,
// and are never modified.
type rowCache struct {
	// Rows by key. Pointers, so that rewriting a cached row, as every
	// commit does, takes one lookup.
	cur, prev map[string]*cachedRow
	curBytes  int
	half      int // Bytes of a generation.
}

// cachedRow is a key's value in the database, or its absence.
type cachedRow struct {
	value  []byte
	absent bool
}

// rowOverhead approximates the memory of a cached row beside its key and
// value: its map slot and string and slice headers.
const rowOverhead = 64

// newRowCache returns a cache of about capacity bytes, or nil (no cache) if
// capacity is not positive.
func newRowCache(capacity int64) *rowCache {
	if capacity <= 0 {
		return nil
	}
	return &rowCache{cur: make(map[string]*cachedRow), half: int(capacity / 2)}
}

// get returns the cached row of key, if the cache has one.
func (c *rowCache) get(key []byte) (cachedRow, bool) {
	if c == nil {
		return cachedRow{}, false
	}
	if r := c.cur[string(key)]; r != nil {
		return *r, true
	}
	var r = c.prev[string(key)]
	if r == nil {
		return cachedRow{}, false
	}
	delete(c.prev, string(key))
	c.add(string(key), r)
	return *r, true
}

// put caches the row of key, which the database holds. The cache retains
// value, which must not be modified after.
func (c *rowCache) put(k string, value []byte, absent bool) {
	if c == nil {
		return
	}
	if r := c.cur[k]; r != nil && len(value) <= len(r.value)+c.half-c.curBytes {
		// Rewritten in place, within the generation's bytes.
		c.curBytes += len(value) - len(r.value)
		r.value, r.absent = value, absent
		return
	} else if r != nil {
		delete(c.cur, k)
		c.curBytes -= len(k) + len(r.value) + rowOverhead
	} else {
		delete(c.prev, k)
	}
	c.add(k, &cachedRow{value: value, absent: absent})
}

func (c *rowCache) add(k string, r *cachedRow) {
	var n = len(k) + len(r.value) + rowOverhead
	if n > c.half {
		delete(c.cur, k)
		return // Larger than a generation: not cached.
	}
	if c.curBytes+n > c.half {
		c.prev, c.cur, c.curBytes = c.cur, make(map[string]*cachedRow, len(c.cur)), 0
	}
	c.cur[k] = r
	c.curBytes += n
}

// commit updates the cache with the writes of an overlay, now in the
// database. It retains their values, which overlays never modify.
func (c *rowCache) commit(o *txnkv.Overlay) {
	if c == nil {
		return
	}
	o.Each(func(e *txnkv.Entry) {
		// The entry's key is never modified: the cache's key string shares it.
		c.put(unsafe.String(unsafe.SliceData(e.Key), len(e.Key)), e.Value, e.Deleted)
	})
}

// clear drops every cached row.
func (c *rowCache) clear() {
	if c == nil {
		return
	}
	c.cur, c.prev, c.curBytes = make(map[string]*cachedRow), nil, 0
}
