package query

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"go.gazette.dev/core/allocator"
	pb "go.gazette.dev/core/broker/protocol"
	pbx "go.gazette.dev/core/broker/protocol/ext"
	pc "go.gazette.dev/core/consumer/protocol"
	"go.gazette.dev/core/keyspace"
	"go.gazette.dev/core/message"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/gazconsumer/gazconsumer/runtime"
	"github.com/gazconsumer/gazconsumer/runtime/partition"
)

// Router maps the calls of a consumer's queries services to the consumer's
// shards, and the shards to their primaries. It reads the consumer's
// KeySpace (its shard specs, members and assignments, as package
// runtime/groupkeys lays them out in etcd), kept current by its owner's
// watch, and lists the partitions that partition keys map among.
//
// The shard of a partition key is found as the consumer's messages find
// theirs: the key maps to a partition journal (partition.Index, among the
// journals the Service's Partitions selector lists, in name order), and the
// shard answering is the one whose spec reads that journal. Routing by the
// journal, rather than by a shard's position among the specs, holds however
// shards are named, and it is by definition the shard holding the key's
// state. It may be used concurrently.
type Router struct {
	ks         *keyspace.KeySpace
	partitions runtime.PartitionLister

	mu    sync.Mutex
	lists map[string]message.PartitionsFunc // Of each selector.
}

// NewRouter returns a Router over the consumer's KeySpace ks, listing
// partitions through partitions.
func NewRouter(ks *keyspace.KeySpace, partitions runtime.PartitionLister) *Router {
	return &Router{ks: ks, partitions: partitions, lists: make(map[string]message.PartitionsFunc)}
}

// KeySpace returns the KeySpace the Router reads.
func (r *Router) KeySpace() *keyspace.KeySpace { return r.ks }

// route is where a shard's primary is, as of a revision of the KeySpace:
// that of the last change of the shard's spec and assignments.
type route struct {
	shard    pc.ShardID
	labels   pb.LabelSet // Of the shard's spec, with its id.
	member   pb.ProcessSpec_ID
	endpoint pb.Endpoint
	revision int64
}

// partitionsOf returns the listing of svc's partitions.
func (r *Router) partitionsOf(svc *Service) (message.PartitionsFunc, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if f, ok := r.lists[svc.Partitions]; ok {
		return f, nil
	}
	var sel, err = pb.ParseLabelSelector(svc.Partitions)
	if err != nil {
		return nil, fmt.Errorf("service %s: partitions %q: %w", svc.Name, svc.Partitions, err)
	}
	var f = r.partitions.Partitions(sel)
	r.lists[svc.Partitions] = f
	return f, nil
}

// shardOf returns the shard reading the partition that partition key key
// maps to, among svc's partitions.
func (r *Router) shardOf(svc *Service, key []byte) (pc.ShardID, error) {
	var list, err = r.partitionsOf(svc)
	if err != nil {
		return "", status.Error(codes.Internal, err.Error())
	}
	var journals = list().Journals
	if len(journals) == 0 {
		return "", status.Errorf(codes.Unavailable, "no partition journal of %s exists (selector %s)", svc.Consumer, svc.Partitions)
	}
	var journal = journals[partition.Index(key, len(journals))].Spec.Name

	r.ks.Mu.RLock()
	defer r.ks.Mu.RUnlock()
	for _, kv := range r.ks.KeyValues.Prefixed(r.ks.Root + allocator.ItemsPrefix) {
		var item = kv.Decoded.(allocator.Item)
		for _, src := range item.ItemValue.(*pc.ShardSpec).Sources {
			if src.Journal == journal {
				return pc.ShardID(item.ID), nil
			}
		}
	}
	return "", status.Errorf(codes.Unavailable, "no shard of %s reads journal %s, the partition of the request's key", svc.Consumer, journal)
}

// shards returns the ids of every shard of the consumer, in order.
func (r *Router) shards() []pc.ShardID {
	r.ks.Mu.RLock()
	defer r.ks.Mu.RUnlock()
	var ids []pc.ShardID
	for _, kv := range r.ks.KeyValues.Prefixed(r.ks.Root + allocator.ItemsPrefix) {
		ids = append(ids, pc.ShardID(kv.Decoded.(allocator.Item).ID))
	}
	return ids
}

// resolve returns the route to the primary of shard id, once the KeySpace
// is at least at revision atLeast (zero: as it is). The shard must have a
// primary that has not failed: an error says otherwise, with status
// Unavailable (the shard does not exist, or has no primary) or
// FailedPrecondition (it failed). A primary still recovering the shard is
// routed to, as Gazette's resolver routes: its member waits until it
// serves, within the call's deadline.
func (r *Router) resolve(ctx context.Context, id pc.ShardID, atLeast int64) (route, error) {
	r.ks.Mu.RLock()
	defer r.ks.Mu.RUnlock()
	if atLeast > r.ks.Header.Revision {
		if err := r.ks.WaitForRevision(ctx, atLeast); err != nil {
			return route{}, status.FromContextError(fmt.Errorf("shard %s: waiting for etcd revision %d: %w", id, atLeast, err)).Err()
		}
	}
	var ind, ok = r.ks.KeyValues.Search(allocator.ItemKey(r.ks, id.String()))
	if !ok {
		return route{}, status.Errorf(codes.Unavailable, "shard %s does not exist", id)
	}
	var itemKV = r.ks.KeyValues[ind]
	var spec = itemKV.Decoded.(allocator.Item).ItemValue.(*pc.ShardSpec)
	var asns = r.ks.KeyValues.Prefixed(allocator.ItemAssignmentsPrefix(r.ks, id.String()))
	var rt pb.Route
	pbx.Init(&rt, asns)
	pbx.AttachEndpoints(&rt, r.ks)
	if rt.Primary == -1 {
		return route{}, status.Errorf(codes.Unavailable, "shard %s has no primary: it is not assigned", id)
	}
	var member = rt.Members[rt.Primary]
	var st = asns[rt.Primary].Decoded.(allocator.Assignment).AssignmentValue.(*pc.ReplicaStatus)
	if st.Code == pc.ReplicaStatus_FAILED {
		return route{}, status.Errorf(codes.FailedPrecondition, "shard %s failed on member %s: %s", id, member.Suffix, strings.Join(st.Errors, "; "))
	}
	if rt.Endpoints[rt.Primary] == "" {
		return route{}, status.Errorf(codes.Unavailable, "shard %s: its primary, member %s, is not announced", id, member.Suffix)
	}
	var revision = itemKV.Raw.ModRevision
	for _, asn := range asns {
		revision = max(revision, asn.Raw.ModRevision)
	}
	return route{
		shard:    id,
		labels:   spec.LabelSetExt(pb.LabelSet{}),
		member:   member,
		endpoint: rt.Endpoints[rt.Primary],
		revision: revision,
	}, nil
}

// The revision a route carries is that of the last change of the keys it
// was resolved from (the shard's spec and assignments), not the KeySpace's:
// a KeySpace's revision also advances with progress notifications of
// writes elsewhere in etcd, which another member's watch may report only
// minutes later, and for which it would wait.

// anyMember returns the endpoint of a member of the consumer, that of the
// primary of its first shard having one if any, and the revision of the
// last change of the KeySpace's keys.
func (r *Router) anyMember() (pb.Endpoint, int64, error) {
	r.ks.Mu.RLock()
	defer r.ks.Mu.RUnlock()
	var revision int64
	for _, kv := range r.ks.KeyValues {
		revision = max(revision, kv.Raw.ModRevision)
	}
	for _, kv := range r.ks.KeyValues.Prefixed(r.ks.Root + allocator.AssignmentsPrefix) {
		var a = kv.Decoded.(allocator.Assignment)
		if a.Slot != 0 {
			continue
		} else if m, ok := allocator.LookupMember(r.ks, a.MemberZone, a.MemberSuffix); ok {
			return m.MemberValue.(*pc.ConsumerSpec).Endpoint, revision, nil
		}
	}
	for _, kv := range r.ks.KeyValues.Prefixed(r.ks.Root + allocator.MembersPrefix) {
		return kv.Decoded.(allocator.Member).MemberValue.(*pc.ConsumerSpec).Endpoint, revision, nil
	}
	return "", 0, status.Error(codes.Unavailable, "the consumer has no member")
}
