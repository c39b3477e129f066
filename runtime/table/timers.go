package table

import (
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/gazconsumer/gazconsumer/runtime"
	"github.com/gazconsumer/gazconsumer/runtime/due"
)

// Timers are the per-key timers of a consumer of one timer message type R
// (a message annotated `(gazconsumer.v1.message).timer`), keyed by the
// timer's key fields K: at most one timer of a key is set at a time, and it
// carries a message R, which the consumer's handler of R is called with
// when it fires. A timer's message is stored as a table's row (the schema
// of the timer is a table's), and its time in the index of what falls due
// (package runtime/due): timers are set, reset and cancelled within a
// transaction, commit with it, and survive recovery and fail-over with the
// store. Their reads see the writes of the current transaction.
type Timers[K any, R proto.Message] struct {
	t Table[K, R]
}

// OpenTimers returns the timers of the schema in the store view kv.
func (s *Schema[K, R]) OpenTimers(kv runtime.KV) Timers[K, R] {
	return Timers[K, R]{t: s.Open(kv)}
}

// Schema returns the schema of the timers.
func (ts Timers[K, R]) Schema() *Schema[K, R] { return ts.t.s }

// Set sets the timer of msg's key to fire at at with msg, in place of any
// timer of that key (a reset): the handler of R is called with msg within
// the first transaction of the shard at or after at (processing time). A
// time before the transaction's (runtime.Txn's Now) is the transaction's:
// the timer fires in the next transaction. Timers are set within a
// transaction of their consumer, whose store view tells its time.
func (ts Timers[K, R]) Set(msg R, at time.Time) error {
	if err := ts.t.Put(msg); err != nil {
		return fmt.Errorf("setting a timer: %w", err)
	}
	var k = ts.t.encode(nil, ts.t.s.def.KeyOf(msg), len(ts.t.s.def.Key))
	if err := schedule(ts.t.kv, k, at, due.Timer); err != nil {
		return fmt.Errorf("%ssetting a timer of %v: %w", ts.t.s.errs, ts.t.s.def.KeyOf(msg), err)
	}
	return nil
}

// SetAfter sets the timer of msg's key to fire d after the transaction's
// time (runtime.Txn's Now), as Set does.
func (ts Timers[K, R]) SetAfter(msg R, d time.Duration) error {
	var tkv, ok = ts.t.kv.(runtime.TimedKV)
	if !ok {
		return fmt.Errorf("%ssetting a timer: its store view %T tells no time (it is not a runtime.TimedKV)", ts.t.s.errs, ts.t.kv)
	}
	return ts.Set(msg, tkv.Now().Add(d))
}

// Cancel cancels the timer of key, and reports whether one was set.
func (ts Timers[K, R]) Cancel(key K) (bool, error) {
	var k = ts.t.encode(nil, key, len(ts.t.s.def.Key))
	var was, err = unschedule(ts.t.kv, k, due.Timer)
	if err == nil && was {
		err = ts.t.kv.Delete(k)
	}
	if err != nil {
		return false, fmt.Errorf("%scancelling the timer of %v: %w", ts.t.s.errs, key, err)
	}
	return was, nil
}

// Get returns the message of the timer of key, and when it fires, if one
// is set.
func (ts Timers[K, R]) Get(key K) (R, time.Time, bool, error) {
	var zero R
	var k = ts.t.encode(nil, key, len(ts.t.s.def.Key))
	var at, found, err = dueAt(ts.t.kv, k)
	if err != nil || !found {
		return zero, at, false, err
	}
	msg, found, err := ts.t.Get(key)
	if err != nil || !found {
		return zero, time.Time{}, false, err
	}
	return msg, at, true, nil
}

// Fires returns the runtime.Timing of the timers of schema s, whose
// firings the consumer's handler method fire (a method expression of its
// handler interface: the rpc taking R) is called with.
func Fires[H any, T runtime.Txner, K any, R proto.Message](s *Schema[K, R], fire func(H, T, R) error) runtime.Timing[H, T] {
	return runtime.Timing[H, T]{
		Name:  s.def.Name,
		Start: s.prefix,
		End:   s.end,
		Fire: func(h H, tx T, key, value []byte) error {
			var msg, err = s.Row(key, value)
			if err != nil {
				return err
			}
			return fire(h, tx, msg)
		},
	}
}
