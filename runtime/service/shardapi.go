package service

import (
	"context"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.gazette.dev/core/allocator"
	pb "go.gazette.dev/core/broker/protocol"
	pc "go.gazette.dev/core/consumer/protocol"
	"google.golang.org/grpc"

	"github.com/gazconsumer/gazconsumer/runtime"
	"github.com/gazconsumer/gazconsumer/runtime/replica"
	"github.com/gazconsumer/gazconsumer/runtime/shardapi"
)

// apiMember is a Service as the Shard API serves it: a shardapi.Member.
type apiMember struct{ s *Service }

var _ shardapi.Member = apiMember{}

func (m apiMember) ID() pb.ProcessSpec_ID            { return m.s.ID() }
func (m apiMember) State() *allocator.State          { return m.s.state }
func (m apiMember) Joined() <-chan struct{}          { return m.s.joinedCh }
func (m apiMember) Etcd() *clientv3.Client           { return m.s.cfg.Etcd }
func (m apiMember) Journals() pb.RoutedJournalClient { return m.s.cfg.Journals }
func (m apiMember) App() runtime.Application         { return m.s.cfg.App }
func (m apiMember) Loopback() *grpc.ClientConn       { return m.s.srv.GRPCLoopback }
func (m apiMember) Authorizer() pb.Authorizer        { return m.s.authorizer() }

// Replica returns the local replica of shard id; it's called with the
// KeySpace read-locked, which guards the replicas.
func (m apiMember) Replica(id pc.ShardID) (shardapi.Replica, bool) {
	var sh, ok = m.s.shards[id]
	if !ok {
		return nil, false
	}
	return apiReplica{sh}, true
}

// apiReplica is a shard replica as Stat reports it: a shardapi.Replica.
type apiReplica struct{ *replica.Replica }

// AwaitServing waits until the replica serves as the primary.
func (r apiReplica) AwaitServing(ctx context.Context) bool { return r.Replica.AwaitServing(ctx) != nil }

// Done is closed once the replica stops.
func (r apiReplica) Done() <-chan struct{} { return r.Context().Done() }
