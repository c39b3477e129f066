package service

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// announcement is a member's key in etcd, under its lease, as Gazette's
// allocator.Announcement, but announced and updated within a context:
// Gazette's Announce retries forever, with no way to stop it, while etcd
// is unreachable or a former lease still holds the key.
type announcement struct {
	etcd     *clientv3.Client
	key      string
	revision int64 // Of the key's last write.
}

// announceRetry is how long announce waits before trying again.
const announceRetry = time.Second

// announce puts value at key under lease, once the key does not exist (a
// former member of the same id may hold it until its lease expires) or is
// already held by lease, trying until ctx is done.
func announce(ctx context.Context, etcd *clientv3.Client, key, value string, lease clientv3.LeaseID) (*announcement, error) {
	for {
		var resp, err = etcd.Txn(ctx).
			If(clientv3.Compare(clientv3.Version(key), "=", 0)).
			Then(clientv3.OpPut(key, value, clientv3.WithLease(lease))).
			Else(clientv3.OpGet(key)).
			Commit()
		if err == nil && resp.Succeeded {
			return &announcement{etcd: etcd, key: key, revision: resp.Header.Revision}, nil
		} else if err == nil {
			var kv = resp.Responses[0].GetResponseRange().Kvs[0]
			if clientv3.LeaseID(kv.Lease) == lease {
				return &announcement{etcd: etcd, key: key, revision: kv.ModRevision}, nil // Ours, of a try whose answer was lost.
			}
			err = fmt.Errorf("key %s is held by another lease (a former member of the same id, until its lease expires)", key)
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("announcing the member: %w", ctx.Err())
		}
		slog.Warn("announcing the member failed; trying again", "key", key, "err", err)
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("announcing the member: %w (last: %v)", ctx.Err(), err)
		case <-time.After(announceRetry):
		}
	}
}

// update puts value at the announcement's key, if no one else wrote it
// since the announcement's last write.
func (a *announcement) update(ctx context.Context, value string) error {
	var resp, err = a.etcd.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(a.key), "=", a.revision)).
		Then(clientv3.OpPut(a.key, value, clientv3.WithIgnoreLease())).
		Commit()
	if err == nil && !resp.Succeeded {
		err = fmt.Errorf("key %s was modified or deleted by another (expected revision %d)", a.key, a.revision)
	}
	if err != nil {
		return fmt.Errorf("updating the member's announcement: %w", err)
	}
	a.revision = resp.Header.Revision
	return nil
}
