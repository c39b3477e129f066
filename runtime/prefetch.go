package runtime

import (
	"fmt"
	"reflect"
	"sync"

	"go.gazette.dev/core/message"
)

// Prefetch holds the store keys of rows that messages queued for a shard
// will likely read as they are handled: generated code appends the keys of
// the rows of its tables that a message names (see ReadsAhead), and a
// KVPrefetcher reads them all in one batch, before their handlers run,
// rather than one Get of the database at a time as the handlers read them.
type Prefetch struct {
	buf  []byte // The keys, one after the other.
	ends []int  // Where each key of buf ends.

	owner     any         // Of scratch, last asked for.
	scratch   any         // Of owner.
	scratches map[any]any // Of each owner.
}

// Scratch returns the scratch value that owner keeps in p (made by fresh
// when first asked for), for appending keys without allocating: a table's
// schema keeps the key it encodes there. p is used by one goroutine at a
// time.
func (p *Prefetch) Scratch(owner any, fresh func() any) any {
	if p.owner == owner {
		return p.scratch
	}
	if p.scratches == nil {
		p.scratches = make(map[any]any)
	}
	var v, ok = p.scratches[owner]
	if !ok {
		v = fresh()
		p.scratches[owner] = v
	}
	p.owner, p.scratch = owner, v
	return v
}

// Append returns the keys' buffer, to append the next key to and pass to
// Add.
func (p *Prefetch) Append() []byte { return p.buf }

// Add adds the key appended to the buffer Append returned: b is that buffer
// with the key appended.
func (p *Prefetch) Add(b []byte) {
	p.buf = b
	p.ends = append(p.ends, len(b))
}

// Len returns the number of keys.
func (p *Prefetch) Len() int { return len(p.ends) }

// Key returns the i-th key, valid until the next Reset.
func (p *Prefetch) Key(i int) []byte {
	var begin int
	if i != 0 {
		begin = p.ends[i-1]
	}
	return p.buf[begin:p.ends[i]:p.ends[i]]
}

// Reset empties p, keeping its memory.
func (p *Prefetch) Reset() { p.buf, p.ends = p.buf[:0], p.ends[:0] }

// KVPrefetcher is a KVStore which reads the rows of many keys ahead of
// their Gets in one batch, as store/rocks does (RocksDB's MultiGet into its
// row cache). A prefetch is only a hint: reads return what they would have
// without it.
type KVPrefetcher interface {
	// Prefetching reports whether the store reads ahead the keys of the
	// next batch of messages, and counts the batch: a store which found
	// the last keys it read ahead almost all at hand may pass on the
	// next batches, whose keys then need not be collected.
	Prefetching() bool
	// Prefetch reads ahead the rows of the keys, as of the current
	// transaction, so that their Gets find them at hand.
	Prefetch(keys *Prefetch) error
}

// Prefetcher is an Application which can tell the rows that messages will
// read before they are handled. A shard's pipeline hands it the messages it
// takes from its readers, in batches, before it sequences and handles them.
// The Adapter of a generated consumer is one, by the ReadsAhead of its
// Inputs.
type Prefetcher interface {
	// Prefetch reads ahead, through the shard's store, the rows that msgs
	// will likely read. An error fails the shard.
	Prefetch(shard Shard, store Store, msgs []message.Message) error
}

// ReadsAhead returns in with the function that appends to p the store keys
// of the rows that a message *M's handler will likely read (its keys of
// rows of the consumer's tables, by a table.Schema's Prefetch), for the
// shard to read them ahead, in batches of messages (see Prefetcher).
// protoc-gen-gazconsumer writes it for the tables whose key fields are
// fields of the message of the same names and types.
func ReadsAhead[H any, T Txner, M any, PM interface {
	*M
	message.Message
}](in Input[H, T], keys func(msg PM, p *Prefetch)) Input[H, T] {
	if in.typ != reflect.TypeFor[PM]() {
		panic(fmt.Sprintf("runtime: ReadsAhead of %s messages given an input of %s", reflect.TypeFor[PM](), in.typ))
	}
	in.prefetch = func(msg message.Message, p *Prefetch) { keys(msg.(PM), p) }
	return in
}

// prefetches recycles the Prefetch of Adapter.Prefetch, which shards call
// concurrently.
var prefetches = sync.Pool{New: func() any { return new(Prefetch) }}

// Prefetch reads ahead, through the store if it is a KVPrefetcher, the rows
// that the handlers of msgs will likely read: the keys their Inputs'
// ReadsAhead name, of the messages the shard owns if its state was split.
func (a *Adapter[H, T]) Prefetch(shard Shard, store Store, msgs []message.Message) error {
	var kp, ok = store.(KVPrefetcher)
	if !ok || !a.prefetches() || !kp.Prefetching() {
		return nil
	}
	var p = prefetches.Get().(*Prefetch)
	defer prefetches.Put(p)
	p.Reset()
	var last reflect.Type
	var in *Input[H, T]
	// A shard whose state was split reads its partitions' messages of keys
	// another shard now owns (which it skips, as its new shard handles
	// them): their rows are not read ahead.
	var g *partitionGuard
	if shard != nil {
		if g = a.guardOf(shard, store); g != nil && g.filter == nil {
			g = nil
		}
	}
	for _, msg := range msgs {
		if g != nil && !g.ownsMessage(msg) {
			continue
		}
		if typ := reflect.TypeOf(msg); typ != last {
			last, in = typ, nil
			for _, i := range a.inputs {
				if i.typ == typ {
					in = i
					break
				}
			}
		}
		if in != nil && in.prefetch != nil {
			in.prefetch(msg, p)
		}
	}
	if p.Len() == 0 {
		return nil
	}
	if err := kp.Prefetch(p); err != nil {
		return fmt.Errorf("%s: reading ahead the rows of %d messages: %w", a.c.Name, len(msgs), err)
	}
	return nil
}

// prefetches reports whether an input of the consumer reads ahead.
func (a *Adapter[H, T]) prefetches() bool {
	for _, in := range a.inputs {
		if in.prefetch != nil {
			return true
		}
	}
	return false
}
