package recoverylog

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"
)

// generationKey is the etcd key of generation g of hints at key: generation
// zero is key itself, and older ones are its backups.
func generationKey(key string, g int) string {
	if g == 0 {
		return key
	}
	return fmt.Sprintf("%s.backup.%d", key, g)
}

// StoreHints writes h to etcd at key, and keeps the hints it replaces as
// backups, up to keep generations in all. It's a transaction which fails
// should the hints change concurrently.
func StoreHints(ctx context.Context, etcd *clientv3.Client, key string, h *Hints, keep int) error {
	keep = max(keep, 1)
	var value, err = proto.Marshal(h)
	if err != nil {
		return fmt.Errorf("encoding hints of %s: %w", h.Log, err)
	}
	var ops = make([]clientv3.Op, keep-1)
	for g := range keep - 1 {
		ops[g] = clientv3.OpGet(generationKey(key, g))
	}
	var cmps []clientv3.Cmp
	var puts = []clientv3.Op{clientv3.OpPut(key, string(value))}
	if len(ops) != 0 {
		var resp, err = etcd.Txn(ctx).Then(ops...).Commit()
		if err != nil {
			return fmt.Errorf("reading hints at %s: %w", key, err)
		}
		for g, r := range resp.Responses {
			var kvs = r.GetResponseRange().Kvs
			if len(kvs) == 0 {
				cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(generationKey(key, g)), "=", 0))
				continue
			}
			cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(generationKey(key, g)), "=", kvs[0].ModRevision))
			puts = append(puts, clientv3.OpPut(generationKey(key, g+1), string(kvs[0].Value)))
		}
	}
	resp, err := etcd.Txn(ctx).If(cmps...).Then(puts...).Commit()
	if err != nil {
		return fmt.Errorf("storing hints at %s: %w", key, err)
	} else if !resp.Succeeded {
		return fmt.Errorf("storing hints at %s: they changed concurrently", key)
	}
	return nil
}

// FetchHints reads the generations of hints stored at key, newest first,
// through generation keep-1. A missing generation is nil: a nil newest
// generation means the log is played from its start.
func FetchHints(ctx context.Context, etcd *clientv3.Client, key string, keep int) ([]*Hints, error) {
	keep = max(keep, 1)
	var ops = make([]clientv3.Op, keep)
	for g := range keep {
		ops[g] = clientv3.OpGet(generationKey(key, g))
	}
	var resp, err = etcd.Txn(ctx).Then(ops...).Commit()
	if err != nil {
		return nil, fmt.Errorf("reading hints at %s: %w", key, err)
	}
	var out = make([]*Hints, keep)
	for g, r := range resp.Responses {
		var kvs = r.GetResponseRange().Kvs
		if len(kvs) == 0 {
			continue
		}
		var h = new(Hints)
		if err = proto.Unmarshal(kvs[0].Value, h); err != nil {
			return nil, fmt.Errorf("decoding hints at %s: %w", generationKey(key, g), err)
		} else if err = validateHints(h); err != nil {
			return nil, fmt.Errorf("hints at %s: %w", generationKey(key, g), err)
		}
		out[g] = h
	}
	return out, nil
}
