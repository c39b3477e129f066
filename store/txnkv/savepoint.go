package txnkv

// savepoint is what an Overlay needs to undo the writes made since its
// savepoint was set: how many entries and bytes it had, and the prior value
// of each entry rewritten since (entries made since are dropped).
type savepoint struct {
	entries int
	bytes   int
	undo    []undo
	saved   map[int32]struct{} // Entries undo holds the prior state of.
}

// undo is the state of an entry before its first rewrite since the
// savepoint.
type undo struct {
	e       *Entry
	value   []byte
	deleted bool
}

// save records the state of entry e, at index i, before a rewrite, unless
// e was made since the savepoint or its prior state is already recorded.
func (sp *savepoint) save(e *Entry, i int32) {
	if int(i) >= sp.entries {
		return
	} else if _, ok := sp.saved[i]; ok {
		return
	}
	sp.saved[i] = struct{}{}
	sp.undo = append(sp.undo, undo{e: e, value: append([]byte(nil), e.Value...), deleted: e.Deleted})
}

// Savepoint sets the overlay's savepoint where its writes are now, in place
// of any earlier one: RollbackToSavepoint undoes the writes made after it.
// A runtime's pipeline sets one before each call of a handler with a
// failure policy, so that a failed call leaves no partial writes. It panics
// if the overlay is frozen.
func (o *Overlay) Savepoint() {
	if o.frozen {
		panic("txnkv: Savepoint of a frozen overlay")
	}
	if o.sp == nil {
		if o.sp, o.spFree = o.spFree, nil; o.sp == nil {
			o.sp = &savepoint{saved: make(map[int32]struct{})}
		}
	}
	// An overlay keeps its savepoint's buffers from one savepoint to the
	// next: a handler call sets one, and most calls rewrite few entries.
	o.sp.entries, o.sp.bytes = o.entries, o.bytes
	clear(o.sp.saved)
	clear(o.sp.undo)
	o.sp.undo = o.sp.undo[:0]
}

// RollbackToSavepoint undoes every write made since the savepoint: entries
// rewritten take back their values, and entries made since are dropped, as
// though those writes were never made. The savepoint stays set. It panics if
// no savepoint is set.
func (o *Overlay) RollbackToSavepoint() {
	var sp = o.sp
	if sp == nil {
		panic("txnkv: RollbackToSavepoint without a savepoint")
	}
	for k := len(sp.undo) - 1; k >= 0; k-- {
		var u = &sp.undo[k]
		u.e.Value, u.e.Deleted = append(u.e.Value[:0], u.value...), u.deleted
	}
	// Drop the entries made since, last first: of two keys sharing a hash,
	// the later one is the one in collided.
	for i := o.entries - 1; i >= sp.entries; i-- {
		var e = o.entry(int32(i))
		if h := o.hashes[i]; o.rows[h] == int32(i) {
			delete(o.rows, h)
		} else {
			delete(o.collided, string(e.Key))
		}
		if o.index != nil && i < o.indexed {
			o.index.Delete(e)
		}
		*e = Entry{}
	}
	var n = sp.entries
	o.hashes, o.leads = o.hashes[:n], o.leads[:n]
	var full = (n + entryChunk - 1) / entryChunk
	for c := full; c < len(o.chunks); c++ {
		o.chunks[c] = nil
	}
	o.chunks = o.chunks[:full]
	if full != 0 {
		o.chunks[full-1] = o.chunks[full-1][:n-(full-1)*entryChunk]
	}
	o.entries, o.indexed, o.bytes = n, min(o.indexed, n), sp.bytes
	o.found = 0
	// What was rolled back is written anew, if at all, from here on.
	clear(sp.saved)
	clear(sp.undo)
	sp.undo = sp.undo[:0]
}

// ReleaseSavepoint ends the savepoint, keeping the writes made since: they
// can no longer be undone but with the whole transaction.
func (o *Overlay) ReleaseSavepoint() {
	if o.sp == nil {
		return
	}
	clear(o.sp.undo) // Of values no longer needed.
	o.sp, o.spFree = nil, o.sp
}
