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
// place of when it was to; if it was deleted, it no longer expires. The
// index of what falls due (package runtime/due) and the row's expiry record
// say so.
func (t Table[K, R]) touch(k []byte, put bool) error {
	var tkv, ok = t.kv.(runtime.TimedKV)
	if !ok && put {
		return fmt.Errorf("its rows expire, but its store view %T tells no time (it is not a runtime.TimedKV)", t.kv)
	}
	var expiry = due.AppendExpiryKey(nil, k)
	var v, found, err = t.kv.Get(expiry)
	if err != nil {
		return fmt.Errorf("reading when it expires: %w", err)
	}
	var at time.Time
	if found {
		if at, err = due.ParseTime(v); err != nil {
			return err
		}
	}
	if !put {
		if !found {
			return nil
		} else if err = t.kv.Delete(due.AppendKey(nil, at, due.Expiry, k)); err == nil {
			err = t.kv.Delete(expiry)
		}
		return err
	}
	var next = tkv.Now().Add(t.s.def.TTL)
	if found && at.Equal(next) {
		return nil // Written again by the transaction: its entry stands.
	} else if found {
		if err = t.kv.Delete(due.AppendKey(nil, at, due.Expiry, k)); err != nil {
			return err
		}
	}
	if err = t.kv.Put(due.AppendKey(nil, next, due.Expiry, k), nil); err == nil {
		err = t.kv.Put(expiry, due.AppendTime(nil, next))
	}
	return err
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
