package table

import (
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/gazconsumer/gazconsumer/runtime"
	"github.com/gazconsumer/gazconsumer/runtime/due"
)

// TTL returns how long a row of the table lives after its last write, or
// zero if its rows don't expire.
func (s *Schema[K, R]) TTL() time.Duration { return s.def.TTL }

// touch dates the row of store key k, of a table with a TTL, by the time of
// the transaction: if it was written (put), it expires TTL from now, in
// place of when it was to; if it was deleted, it no longer expires.
func (t Table[K, R]) touch(k []byte, put bool) error {
	if !put {
		var _, err = unschedule(t.kv, k, due.Expiry)
		return err
	}
	var tkv, ok = t.kv.(runtime.TimedKV)
	if !ok {
		return fmt.Errorf("its rows expire, but its store view %T tells no time (it is not a runtime.TimedKV)", t.kv)
	}
	return schedule(t.kv, k, tkv.Now().Add(t.s.def.TTL), due.Expiry)
}

// schedule has the subject of store key k fall due at at, of kind, in
// place of when it was to: the index of what falls due (package
// runtime/due) and the subject's record say so. A time before the
// transaction's is the transaction's: the index holds nothing due before
// the time its shard last fired (see runtime.Adapter.Fire).
func schedule(kv runtime.KV, k []byte, at time.Time, kind due.Kind) error {
	if tkv, ok := kv.(runtime.TimedKV); ok && at.Before(tkv.Now()) {
		at = tkv.Now()
	}
	var record = due.AppendExpiryKey(nil, k)
	var v, found, err = kv.Get(record)
	if err != nil {
		return fmt.Errorf("reading when it is due: %w", err)
	}
	if found {
		var was time.Time
		if was, err = due.ParseTime(v); err != nil {
			return err
		} else if was.Equal(at) {
			return nil // Its entry stands.
		} else if err = kv.Delete(due.AppendKey(nil, was, kind, k)); err != nil {
			return err
		}
	}
	if err = kv.Put(due.AppendKey(nil, at, kind, k), nil); err == nil {
		err = kv.Put(record, due.AppendTime(nil, at))
	}
	return err
}

// unschedule has the subject of store key k, of kind, no longer fall due,
// and reports whether it was to.
func unschedule(kv runtime.KV, k []byte, kind due.Kind) (bool, error) {
	var record = due.AppendExpiryKey(nil, k)
	var v, found, err = kv.Get(record)
	if err != nil || !found {
		return false, err
	}
	var at time.Time
	if at, err = due.ParseTime(v); err != nil {
		return false, err
	} else if err = kv.Delete(due.AppendKey(nil, at, kind, k)); err == nil {
		err = kv.Delete(record)
	}
	return err == nil, err
}

// dueAt returns when the subject of store key k falls due, if it does.
func dueAt(kv runtime.KV, k []byte) (time.Time, bool, error) {
	var v, found, err = kv.Get(due.AppendExpiryKey(nil, k))
	if err != nil || !found {
		return time.Time{}, false, err
	}
	var at time.Time
	at, err = due.ParseTime(v)
	return at, err == nil, err
}

// Expires returns the runtime.Expiring of the table of schema s, whose rows
// expire, for a consumer whose handler is told of each row that expires by
// onExpire (which calls the handler's optional OnExpire… method, if it has
// one).
func Expires[H any, T runtime.Txner, K any, R proto.Message](s *Schema[K, R], onExpire func(H, T, R) error) runtime.Expiring[H, T] {
	return runtime.Expiring[H, T]{
		Table: s.def.Name,
		Start: s.prefix,
		End:   s.end,
		Expire: func(h H, tx T, key, value []byte) error {
			var row, err = s.Row(key, value)
			if err != nil {
				return err
			}
			return onExpire(h, tx, row)
		},
	}
}
