// Package groupkeys is the layout of a consumer group's keys in etcd: under
// the group's prefix, its shard specs (the allocator's items), its members'
// ConsumerSpecs and the ReplicaStatus of each assignment, laid out as
// Gazette's consumers lay theirs out, so that gazctl and other tools read
// them unchanged. Members (runtime/service) and pure clients (query routers,
// commands) load and watch a group's KeySpace through it, without the
// server.
package groupkeys

import (
	"context"
	"fmt"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.gazette.dev/core/allocator"
	pb "go.gazette.dev/core/broker/protocol"
	pc "go.gazette.dev/core/consumer/protocol"
	"go.gazette.dev/core/keyspace"
)

// NewKeySpace returns the KeySpace of a consumer application rooted at
// prefix, laid out as Gazette consumers lay theirs out (so gazctl and other
// tools read it unchanged): items are ShardSpecs, members are ConsumerSpecs
// and assignments are ReplicaStatuses.
func NewKeySpace(prefix string) *keyspace.KeySpace {
	return allocator.NewAllocatorKeySpace(prefix, decoder{})
}

// Watch loads the KeySpace of the consumer application rooted at
// prefix from etcd, and keeps it current until ctx is done: what a client
// routing calls to members (runtime/query.NewRouter) reads. Watch errors
// are logged by the KeySpace, which retries.
func Watch(ctx context.Context, etcd *clientv3.Client, prefix string) (*keyspace.KeySpace, error) {
	var ks = NewKeySpace(prefix)
	if err := ks.Load(ctx, etcd, 0); err != nil {
		return nil, fmt.Errorf("loading the KeySpace %s: %w", prefix, err)
	}
	go func() { _ = ks.Watch(ctx, etcd) }()
	return ks, nil
}

// decoder decodes and validates the values of a consumer KeySpace. A spec's
// identity must match the identity its key implies.
type decoder struct{}

func (decoder) DecodeItem(id string, raw *mvccpb.KeyValue) (allocator.ItemValue, error) {
	var s = new(pc.ShardSpec)
	if err := s.Unmarshal(raw.Value); err != nil {
		return nil, err
	} else if err = s.Validate(); err != nil {
		return nil, err
	} else if s.Id.String() != id {
		return nil, pb.NewValidationError("ShardSpec Id %q differs from its key's %q", s.Id, id)
	}
	return s, nil
}

func (decoder) DecodeMember(zone, suffix string, raw *mvccpb.KeyValue) (allocator.MemberValue, error) {
	var s = new(pc.ConsumerSpec)
	if err := s.Unmarshal(raw.Value); err != nil {
		return nil, err
	} else if err = s.Validate(); err != nil {
		return nil, err
	} else if s.Id.Zone != zone || s.Id.Suffix != suffix {
		return nil, pb.NewValidationError("ConsumerSpec Id %s differs from its key's %s#%s", s.Id.String(), zone, suffix)
	}
	return s, nil
}

func (decoder) DecodeAssignment(_, _, _ string, _ int, raw *mvccpb.KeyValue) (allocator.AssignmentValue, error) {
	var s = new(pc.ReplicaStatus)
	if err := s.Unmarshal(raw.Value); err != nil {
		return nil, err
	} else if err = s.Validate(); err != nil {
		return nil, err
	}
	return s, nil
}
