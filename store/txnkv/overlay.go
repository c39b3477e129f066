package txnkv

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"hash/maphash"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/google/btree"
)

// Overlay holds the writes of one transaction until its store writes them
// in one batch. It keeps its entries in chunks that never move, their keys
// and values in slabs of bytes, and finds them by key through a map from a
// hash of the key to the entry's place, which holds no pointers for the
// garbage collector to trace. Entries are put in key order, for scans and
// batches, only when they're first read in order: a transaction which
// scans its own writes indexes them in a B-tree as it does (an entry enters
// the index once, however often it's rewritten; RocksDB's own indexed
// batch, WriteBatchWithIndex, decodes a record of its batch on every
// comparison of its index, and costs some microseconds per Put); one which
// never does has its entries sorted once, by the first reader in order of
// the frozen overlay (most often its store's commit, apart from the shard's
// goroutine), which costs a fraction of the inserts into a B-tree. A scan
// of an overlay neither indexed nor sorted yet passes over its entries,
// picking those of its range, as long as its passes have cost little
// beside the index or the sort (see passBudget): so a transaction whose
// only scans are of a narrow range (what falls due, read as it commits)
// is neither indexed nor sorted for them.
//
// An Overlay is written by one goroutine until its transaction commits,
// when Freeze ends its writes; after that it is only read, possibly
// concurrently.
type Overlay struct {
	rows     map[uint64]int32      // Index of the entry of the hash of a key.
	collided map[string]int32      // Index of the entry of a key whose hash another key's entry has in rows.
	chunks   [][]Entry             // The entries, in the order their keys were first written.
	hashes   []uint64              // The hash of the key of each entry, by index.
	leads    []byte                // The first byte of the key of each entry (0 if empty), by index: see pass.
	slab     []byte                // Where the bytes of the next entries go.
	index    *btree.BTreeG[*Entry] // Entries in key order, but the last unindexed; nil until first needed.
	entries  int                   // Count of entries in chunks.
	indexed  int                   // Count of the first entries of chunks in index.
	bytes    int                   // Of the keys and values of the entries.

	sp     *savepoint // The savepoint set, if any: see Savepoint.
	spFree *savepoint // A savepoint released, for the next.

	// found is 1 + the index of the entry FindForWrite last found, or 0: a
	// write of its key, which most often follows (a handler reads a row,
	// then writes it), takes it without hashing the key or looking it up
	// in rows again (whose lookups miss the processor's caches).
	found int32

	frozen bool
	filter []uint64     // Bits of the hashes of the keys, once there are minFiltered: see mayHave.
	sortMu sync.Once    // Sorts sorted, once frozen, if index is nil.
	sorted []*Entry     // Entries in key order, of a frozen overlay without an index.
	isSort atomic.Bool  // Whether sorted is set.
	passed atomic.Int64 // The cost of the scans which passed over the entries: see passBudget.
}

// passBudget bounds the scans which pass over an overlay's entries rather
// than ascend its index or its sorted entries: a scan passes while the
// cost of the passes, with its own (an entry whose key is compared costs
// 1, another 1/passLeadCost, one of the range, which is sorted,
// passSortCost), is at most passBudget times the entries. A pass looks at
// an entry some hundred times faster than the index inserts one, and a few
// tens of times faster than the sort sorts one; past the budget, the
// overlay is indexed (or sorted, once frozen), which costs no more than the
// passes did, so that scans of a growing overlay cost at most a constant
// times the index's inserts.
const (
	passBudget   = 16
	passSortCost = 8
	// passLeadCost is how many times cheaper a pass's look at the first
	// byte of an entry's key (leads) is than a comparison of its key.
	passLeadCost = 16
)

// Entry is a key written by a transaction: its value, or its deletion. Its
// Key is never modified, nor its Value once the overlay is frozen, so that
// they may be read from then on, as long as the overlay is. Their bytes
// share slabs with other entries': a reader which keeps them longer copies
// them.
type Entry struct {
	Key, Value []byte
	Deleted    bool
}

// entryChunk is how many entries a chunk of an overlay holds. Chunks never
// grow, so entries never move and the map and index can point to them.
const entryChunk = 256

// Slabs of an overlay's bytes, and the largest entry allocated from them
// (larger ones have bytes of their own).
const (
	slabBytes    = 16 << 10
	maxSlabEntry = slabBytes / 8
)

// overlaySeed seeds the hashes of overlays' keys.
var overlaySeed = maphash.MakeSeed()

// lead returns the first byte of key, or 0 if it's empty.
func lead(key []byte) byte {
	if len(key) == 0 {
		return 0
	}
	return key[0]
}

// hashKey hashes a key of an overlay. Tests replace it, to make keys
// collide.
var hashKey = func(key []byte) uint64 { return maphash.Bytes(overlaySeed, key) }

// overlayFreeList recycles the index nodes of released overlays.
var overlayFreeList = btree.NewFreeListG[*Entry](1024)

func entryLess(a, b *Entry) bool { return bytes.Compare(a.Key, b.Key) < 0 }

// NewOverlay returns an empty Overlay.
func NewOverlay() *Overlay {
	return &Overlay{rows: make(map[uint64]int32)}
}

// Put records key as set to value. It copies both.
func (o *Overlay) Put(key, value []byte) { o.write(key, value, false) }

// Delete records key as deleted. It copies key.
func (o *Overlay) Delete(key []byte) { o.write(key, nil, true) }

// entry returns the entry at index i.
func (o *Overlay) entry(i int32) *Entry { return &o.chunks[i/entryChunk][i%entryChunk] }

// find returns the entry of key, its index and true, or the hash of key,
// whether rows holds an entry of another key of that hash, and false.
func (o *Overlay) find(key []byte) (e *Entry, i int32, h uint64, taken, ok bool) {
	h = hashKey(key)
	e, i, taken, ok = o.findHashed(key, h)
	return e, i, h, taken, ok
}

// findHashed is find of key, whose hash is h.
func (o *Overlay) findHashed(key []byte, h uint64) (e *Entry, i int32, taken, ok bool) {
	if o.filter != nil && !o.mayHave(h) {
		return nil, 0, false, false
	}
	if i, taken = o.rows[h]; !taken {
		return nil, 0, false, false
	} else if e = o.entry(i); bytes.Equal(e.Key, key) {
		return e, i, true, true
	} else if i, ok = o.collided[string(key)]; ok {
		return o.entry(i), i, true, true
	}
	return nil, 0, true, false
}

// FindForWrite is GetHashed of an overlay still written: a write of key
// next finds its entry without a lookup.
func (o *Overlay) FindForWrite(key []byte, h uint64) (Entry, bool) {
	if e, i, _, ok := o.findHashed(key, h); ok {
		o.found = i + 1
		return *e, true
	}
	return Entry{}, false
}

// foundFor returns the entry FindForWrite last found and its index, if its
// key is key.
func (o *Overlay) foundFor(key []byte) (*Entry, int32, bool) {
	if o.found == 0 || int(o.found) > o.entries {
		return nil, 0, false
	}
	var i = o.found - 1
	if e := o.entry(i); bytes.Equal(e.Key, key) {
		return e, i, true
	}
	return nil, 0, false
}

func (o *Overlay) write(key, value []byte, deleted bool) {
	var e, i, ok = o.foundFor(key)
	var h uint64
	var taken bool
	if !ok {
		e, i, h, taken, ok = o.find(key)
	}
	if ok {
		if o.sp != nil {
			o.sp.save(e, i)
		}
		// Rewritten: the entry keeps its key, and its place in the index,
		// and its value's bytes if they have room: until the overlay is
		// frozen, nothing retains them (a value Get returns is valid until
		// the next call on its store, and Scan's callback may not write).
		o.bytes += len(value) - len(e.Value)
		e.Value, e.Deleted = append(e.Value[:0], value...), deleted
		return
	}
	var b = o.alloc(len(key) + len(value))
	copy(b, key)
	copy(b[len(key):], value)

	if n := len(o.chunks); n == 0 || len(o.chunks[n-1]) == entryChunk {
		o.chunks = append(o.chunks, make([]Entry, 0, entryChunk))
	}
	var c = &o.chunks[len(o.chunks)-1]
	// Both slices end where the entry's bytes do: a longer rewrite of the
	// value moves it rather than write over another entry's bytes.
	*c = append(*c, Entry{Key: b[:len(key):len(key)], Value: b[len(key):len(b):len(b)], Deleted: deleted})
	i = int32(o.entries)
	o.hashes = append(o.hashes, h)
	o.leads = append(o.leads, lead(key))
	if !taken {
		o.rows[h] = i
	} else {
		if o.collided == nil {
			o.collided = make(map[string]int32)
		}
		o.collided[string(key)] = i
	}
	o.entries++
	o.bytes += len(key) + len(value)
	o.filterAdd(h)
}

// filterAdd adds h, the hash of the key of an entry just made, to the
// overlay's filter: it makes the filter once the overlay has minFiltered
// entries, and makes it again, twice as large, from the hashes of every
// entry, whenever the entries fill it past eight bits an entry: a hash's
// bits are set about twice, in all, as the overlay grows.
func (o *Overlay) filterAdd(h uint64) {
	if o.filter == nil && o.entries < minFiltered {
		return
	} else if o.filter == nil || len(o.filter)*64 < 8*o.entries {
		// A power of two of words, at least eight bits an entry.
		var words = max(1, len(o.filter))
		for words*64 < 8*o.entries {
			words *= 2
		}
		var filter = make([]uint64, words)
		// Keys of collided share a hash of rows: their bits are set. Those
		// of entries rolled back are not, as they are no longer hashes.
		for _, h := range o.hashes[:o.entries] {
			setFilterBits(filter, h)
		}
		o.filter = filter
		return
	}
	setFilterBits(o.filter, h)
}

// setFilterBits sets the two bits of h in filter (see filterBits).
func setFilterBits(filter []uint64, h uint64) {
	var a, b = filterBits(h, len(filter))
	filter[a/64] |= 1 << (a % 64)
	filter[b/64] |= 1 << (b % 64)
}

// alloc returns n bytes for an entry.
func (o *Overlay) alloc(n int) []byte {
	if n > maxSlabEntry {
		return make([]byte, n)
	}
	if len(o.slab)+n > cap(o.slab) {
		o.slab = make([]byte, 0, slabBytes)
	}
	var b = o.slab[len(o.slab) : len(o.slab)+n : len(o.slab)+n]
	o.slab = o.slab[:len(o.slab)+n]
	return b
}

// Get returns the entry of key, if the overlay has one.
func (o *Overlay) Get(key []byte) (Entry, bool) { return o.GetHashed(key, HashKey(key)) }

// HashKey returns the hash of key by which overlays find it: a caller
// looking key up in several overlays hashes it once, for GetHashed.
func HashKey(key []byte) uint64 { return hashKey(key) }

// GetHashed returns the entry of key, whose hash is h (see HashKey), if the
// overlay has one.
func (o *Overlay) GetHashed(key []byte, h uint64) (Entry, bool) {
	if e, _, _, ok := o.findHashed(key, h); ok {
		return *e, true
	}
	return Entry{}, false
}

// minFiltered is the fewest entries an overlay has a filter of.
const minFiltered = 1024

// mayHave reports whether the overlay, which has a filter, may have a key
// of hash h: a Bloom filter of two bits a key, at least eight bits a key in
// all, which answers a lookup of most keys the overlay doesn't have from
// memory a sixteenth of its map's, which a lookup of a large overlay would
// mostly miss in the processor's caches (a store's reads look every key up
// in its transaction's overlay and its commit's, and most keys of a large
// key space are in neither). The overlay keeps it from its minFiltered-th
// entry on, as it's written (filterAdd), even if a rollback to a savepoint
// drops entries below that: the rollback leaves the bits of the entries it
// drops set, which costs such keys' lookups only a look at the map.
func (o *Overlay) mayHave(h uint64) bool {
	var a, b = filterBits(h, len(o.filter))
	return o.filter[a/64]&(1<<(a%64)) != 0 && o.filter[b/64]&(1<<(b%64)) != 0
}

// filterBits returns the two bits of a filter of words words (a power of
// two) which stand for hash h.
func filterBits(h uint64, words int) (a, b uint64) {
	var mask = uint64(words)*64 - 1
	return h & mask, (h >> 32) & mask
}

// Len is the number of keys written.
func (o *Overlay) Len() int { return o.entries }

// Bytes is the number of bytes of the keys and values written.
func (o *Overlay) Bytes() int { return o.bytes }

// Each calls fn with every entry, in no particular order.
func (o *Overlay) Each(fn func(*Entry)) {
	for _, c := range o.chunks {
		for i := range c {
			fn(&c[i])
		}
	}
}

// EachHashed calls fn with every entry and the hash of its key (see
// HashKey), in no particular order: a reader which looks the keys up
// elsewhere by the same hash need not hash them again.
func (o *Overlay) EachHashed(fn func(e *Entry, h uint64)) {
	var n int
	for _, c := range o.chunks {
		for i := range c {
			fn(&c[i], o.hashes[n])
			n++
		}
	}
}

// Freeze ends the overlay's writes: it's not written after, and may be read
// concurrently.
func (o *Overlay) Freeze() {
	if o.frozen {
		return
	}
	o.frozen = true
	if o.index != nil {
		o.indexUnindexed()
	}
	// The filter, if the overlay has one, has every entry's bits already.
}

// indexUnindexed brings the index up to date.
func (o *Overlay) indexUnindexed() {
	if o.index == nil {
		o.index = btree.NewWithFreeListG(32, entryLess, overlayFreeList)
	}
	for i := o.indexed; i < o.entries; i++ {
		o.index.ReplaceOrInsert(o.entry(int32(i)))
	}
	o.indexed = o.entries
}

// Ascend calls fn with each entry in [start, end), in key order, until fn
// returns false. A nil end means no upper bound.
func (o *Overlay) Ascend(start, end []byte, fn func(Entry) bool) {
	if o.index == nil && !o.isSort.Load() && o.pass(start, end, fn) {
		return
	}
	if !o.frozen || o.index != nil {
		if !o.frozen {
			o.indexUnindexed()
		}
		var visit = func(e *Entry) bool { return fn(*e) }
		if end == nil {
			o.index.AscendGreaterOrEqual(&Entry{Key: start}, visit)
		} else {
			o.index.AscendRange(&Entry{Key: start}, &Entry{Key: end}, visit)
		}
		return
	}
	o.sortMu.Do(o.sort)
	var i, _ = slices.BinarySearchFunc(o.sorted, start, func(e *Entry, k []byte) int { return bytes.Compare(e.Key, k) })
	for _, e := range o.sorted[i:] {
		if end != nil && bytes.Compare(e.Key, end) >= 0 || !fn(*e) {
			return
		}
	}
}

// pass calls fn with each entry in [start, end), in key order, until fn
// returns false, having picked them in a pass over every entry and sorted
// them, and returns true, if the passes' cost stays within passBudget and
// the range holds at most one entry in passSortCost. Else it returns false,
// having called nothing. It may be called concurrently once the overlay is
// frozen.
//
// The pass reads the first byte of each entry's key from leads, and reads
// the keys only of the entries whose first byte may be in the range (their
// candidates): a scan of a range of keys of one first byte, where most keys
// written begin with another (the runtime's index of what falls due, and a
// transaction's rows of tables), costs little more than a look at a byte
// an entry, and doesn't use up the budget as a pass comparing every key
// would.
func (o *Overlay) pass(start, end []byte, fn func(Entry) bool) bool {
	var budget = int64(passBudget * o.entries)
	if start == nil && end == nil || o.passed.Load()+int64(o.entries/passLeadCost) > budget {
		return false // A scan of every entry is served by the index or the sort.
	}
	var lo, hi = byte(0), byte(0xff)
	if len(start) != 0 {
		lo = start[0]
	}
	if end != nil {
		if len(end) == 0 {
			return true // Nothing is before the empty key.
		}
		hi = end[0]
	}
	var in []*Entry
	var candidates int
	for i, l := range o.leads[:o.entries] {
		if l < lo || l > hi {
			continue
		}
		candidates++
		var e = o.entry(int32(i))
		if bytes.Compare(e.Key, start) >= 0 && (end == nil || bytes.Compare(e.Key, end) < 0) {
			in = append(in, e)
		}
	}
	var cost = o.entries/passLeadCost + candidates + passSortCost*len(in)
	if o.passed.Add(int64(cost)); passSortCost*len(in) > o.entries {
		// Many of the entries: the index or the sort, which orders keys
		// faster, serves this scan and the next.
		return false
	}
	slices.SortFunc(in, func(a, b *Entry) int { return bytes.Compare(a.Key, b.Key) })
	for _, e := range in {
		if !fn(*e) {
			break
		}
	}
	return true
}

// sort sets sorted to the entries in key order. It compares the eight
// bytes of each key past the prefix common to all of them as a number, and
// whole keys only where those are equal: most comparisons then read no
// entry (generated tables' keys share their table's prefix).
func (o *Overlay) sort() {
	type item struct {
		word uint64
		e    *Entry
	}
	var items = make([]item, 0, o.entries)
	var common []byte
	o.Each(func(e *Entry) {
		if len(items) == 0 {
			common = e.Key
		} else {
			var n = 0
			for n < len(common) && n < len(e.Key) && common[n] == e.Key[n] {
				n++
			}
			common = common[:n]
		}
		items = append(items, item{e: e})
	})
	for i := range items {
		var k = items[i].e.Key[len(common):]
		var b [8]byte
		copy(b[:], k)
		items[i].word = binary.BigEndian.Uint64(b[:])
	}
	slices.SortFunc(items, func(a, b item) int {
		if c := cmp.Compare(a.word, b.word); c != 0 {
			return c
		}
		return bytes.Compare(a.e.Key, b.e.Key)
	})
	o.sorted = make([]*Entry, len(items))
	for i := range items {
		o.sorted[i] = items[i].e
	}
	o.isSort.Store(true)
}

// Release returns the overlay's index nodes to a free list shared by
// overlays. The overlay's entries may still be retained; the overlay itself
// is not used after.
func (o *Overlay) Release() {
	if o.index != nil {
		o.index.Clear(true)
	}
}
