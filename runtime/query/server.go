package query

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	pb "go.gazette.dev/core/broker/protocol"
	pc "go.gazette.dev/core/consumer/protocol"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/gazconsumer/gazconsumer/runtime"
)

// Metadata of the calls that routers and members make.
const (
	// ShardMetadata names the shard that must answer a call, from its
	// primary: the member receiving it answers from its replica of the
	// shard, or refuses with Unavailable; it never proxies it further.
	ShardMetadata = "gazconsumer-shard"
	// RevisionMetadata is the etcd revision of the last change of the
	// keys that routed a call (the shard's spec and assignments): the
	// member receiving it routes it by a KeySpace at least as recent.
	RevisionMetadata = "gazconsumer-revision"
)

// Member is the member a Server serves queries on: runtime/service's
// Service implements it.
type Member interface {
	// ID of the member.
	ID() pb.ProcessSpec_ID
	// Replica waits until the member's replica of shard id serves as the
	// shard's primary (it may still be recovering the shard, or starting),
	// and returns its store and the replica's context, which is cancelled
	// once the replica stops. It returns false at once if the member has no
	// replica of the shard, and once the replica stops, or ctx ends, before
	// it serves.
	Replica(ctx context.Context, id pc.ShardID) (store runtime.CommittedReader, replica context.Context, ok bool)
}

// ServerConfig configures a Server.
type ServerConfig struct {
	// Member served on.
	Member Member
	// Router of the member's consumer, over the member's KeySpace.
	Router *Router
	// Verifier verifies the authorization of calls (see the package
	// documentation). Nil serves every call.
	Verifier pb.Verifier
	// Authorizer signs the authorization of calls the member proxies to
	// other members. Nil sends none.
	Authorizer pb.Authorizer
	// Dial returns a connection to the member serving at an endpoint (over
	// the member's peer TLS). The Server keeps it until Close.
	Dial func(pb.Endpoint) (*grpc.ClientConn, error)
}

// Server serves the queries services of a member's consumer.
type Server struct {
	cfg ServerConfig

	mu    sync.Mutex
	conns map[pb.Endpoint]*grpc.ClientConn
}

// NewServer returns a Server of cfg.
func NewServer(cfg ServerConfig) *Server {
	return &Server{cfg: cfg, conns: make(map[pb.Endpoint]*grpc.ClientConn)}
}

// Register registers the queries service svc on reg.
func (s *Server) Register(reg grpc.ServiceRegistrar, svc *Service) {
	var desc = &grpc.ServiceDesc{
		ServiceName: svc.Name,
		HandlerType: (*any)(nil),
		Metadata:    svc.File,
	}
	for _, m := range svc.Methods {
		desc.Methods = append(desc.Methods, grpc.MethodDesc{MethodName: m.name, Handler: s.handler(svc, m)})
	}
	reg.RegisterService(desc, s)
}

// handler returns the gRPC handler of method m of svc.
func (s *Server) handler(svc *Service, m *Method) grpc.MethodHandler {
	var info = &grpc.UnaryServerInfo{Server: s, FullMethod: svc.FullMethod(m.name)}
	return func(_ any, ctx context.Context, dec func(any) error, intercept grpc.UnaryServerInterceptor) (any, error) {
		var req = m.newReq()
		if err := dec(req); err != nil {
			return nil, err
		}
		var serve = func(ctx context.Context, req any) (any, error) { return s.serve(ctx, svc, m, req.(proto.Message)) }
		if intercept == nil {
			return serve(ctx, req)
		}
		return intercept(ctx, req, info, serve)
	}
}

// Close closes the Server's connections to other members.
func (s *Server) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.conns {
		_ = c.Close()
	}
	s.conns = make(map[pb.Endpoint]*grpc.ClientConn)
}

// serve answers a call of m.
func (s *Server) serve(ctx context.Context, svc *Service, m *Method, req proto.Message) (proto.Message, error) {
	var ctx2, cancel, claims, err = s.verify(ctx)
	if err != nil {
		return nil, err
	}
	defer cancel()
	ctx = ctx2
	o, err := m.prepare(req)
	if err != nil {
		return nil, err
	}
	var md, _ = metadata.FromIncomingContext(ctx)
	rev, err := revisionOf(md)
	if err != nil {
		return nil, err
	}
	if ids := md.Get(ShardMetadata); len(ids) != 0 {
		// Routed here: answer from this member's replica, or refuse.
		var id = pc.ShardID(ids[0])
		var rt, err = s.cfg.Router.resolve(ctx, id, rev)
		if err != nil {
			return nil, err
		} else if err = authorized(claims, rt); err != nil {
			return nil, err
		} else if rt.member != s.cfg.Member.ID() {
			return nil, status.Errorf(codes.Unavailable, "shard %s: member %s is not its primary (member %s is)", id, s.cfg.Member.ID().Suffix, rt.member.Suffix)
		}
		var a, rerr = s.readLocal(ctx, rt, o)
		if rerr == nil && a == nil {
			return nil, o.missingIn("in shard " + id.String())
		}
		return a, rerr
	}
	if o.routed {
		return s.serveRouted(ctx, claims, svc, m, req, o, rev)
	}
	var ids = s.cfg.Router.shards()
	if len(ids) == 0 {
		return nil, status.Errorf(codes.Unavailable, "%s has no shards", svc.Consumer)
	}
	var answers = make([]proto.Message, len(ids))
	var errs = make([]error, len(ids))
	var wg sync.WaitGroup
	for i, id := range ids {
		wg.Go(func() { answers[i], errs[i] = s.ask(ctx, claims, svc, m, req, o, id, rev) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err // The first in shard order, naming its shard.
		}
	}
	a, err := o.merge(answers)
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	} else if a == nil {
		return nil, o.missingIn(fmt.Sprintf("in any of the %d shards of %s", len(ids), svc.Consumer))
	}
	return a, nil
}

// serveRouted answers a call of m routed by its partition key, asking the
// shard the Router maps it to; and again, as the Router's partitions change,
// if the shard no longer owns the key (split by a rescale whose journals
// the Router does not list yet), within rerouteWait.
func (s *Server) serveRouted(ctx context.Context, claims pb.Claims, svc *Service, m *Method, req proto.Message, o *op, rev int64) (proto.Message, error) {
	var since = time.Now()
	for {
		var id, err = s.cfg.Router.shardOf(svc, o.partition)
		if err != nil {
			return nil, err
		}
		var a, rerr = s.ask(ctx, claims, svc, m, req, o, id, rev)
		switch {
		case rerr == nil && a == nil:
			return nil, o.missingIn("in shard " + id.String())
		case !notOwned(rerr) || time.Since(since) > rerouteWait:
			return a, rerr
		}
		select {
		case <-ctx.Done():
			return nil, status.FromContextError(ctx.Err()).Err()
		case <-time.After(rerouteRetry):
		}
	}
}

// rerouteWait bounds how long a call routed to a shard that no longer owns
// its key is routed again, and rerouteRetry how often.
const (
	rerouteWait  = 10 * time.Second
	rerouteRetry = 25 * time.Millisecond
)

// notOwnedReason is the reason, in an Unavailable status's ErrorInfo, of a
// call routed to a shard that no longer owns its partition key.
const notOwnedReason = "PARTITION_KEY_NOT_OWNED"

// errNotOwned returns the status of a call routed to shard id, which no
// longer owns its partition key: it was split by a rescale.
func errNotOwned(id pc.ShardID) error {
	var st = status.Newf(codes.Unavailable, "shard %s no longer owns the request's key (it was split by a rescale whose partitions the router does not list yet): route the call again", id)
	if d, err := st.WithDetails(&errdetails.ErrorInfo{Reason: notOwnedReason, Domain: "gazconsumer.dev"}); err == nil {
		st = d
	}
	return st.Err()
}

// notOwned reports whether err is errNotOwned's.
func notOwned(err error) bool {
	var st, ok = status.FromError(err)
	if !ok || st.Code() != codes.Unavailable {
		return false
	}
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.Reason == notOwnedReason {
			return true
		}
	}
	return false
}

// ask returns the answer of shard id to req: read here if this member is
// the shard's primary, or asked of the primary. A nil answer is a GET's
// missing row.
func (s *Server) ask(ctx context.Context, claims pb.Claims, svc *Service, m *Method, req proto.Message, o *op, id pc.ShardID, rev int64) (proto.Message, error) {
	var rt, err = s.cfg.Router.resolve(ctx, id, rev)
	if err != nil {
		return nil, err
	} else if err = authorized(claims, rt); err != nil {
		return nil, err
	}
	if rt.member == s.cfg.Member.ID() {
		return s.readLocal(ctx, rt, o)
	}
	conn, err := s.conn(rt.endpoint)
	if err != nil {
		return nil, status.Errorf(codes.Unavailable, "shard %s: dialing its primary, member %s at %s: %v", id, rt.member.Suffix, rt.endpoint, err)
	}
	ctx = withRoute(ctx, rt)
	if s.cfg.Authorizer != nil {
		if ctx, err = s.cfg.Authorizer.Authorize(ctx, shardClaims(id), time.Minute); err != nil {
			return nil, status.Errorf(codes.Internal, "authorizing the call of shard %s's primary: %v", id, err)
		}
	}
	var resp = m.newResp()
	err = conn.Invoke(ctx, svc.FullMethod(m.name), req, resp)
	if status.Code(err) == codes.NotFound {
		return nil, nil
	} else if err != nil {
		return nil, unreachable(err, rt)
	}
	return resp, nil
}

// unreachable names the shard and primary of rt in err, an error of a call
// routed by rt, if it is Unavailable without naming the shard: the primary
// could not be reached (it may have stopped, its assignment not yet gone).
func unreachable(err error, rt route) error {
	var st = status.Convert(err)
	if st.Code() != codes.Unavailable || strings.Contains(st.Message(), "shard "+rt.shard.String()) {
		return err
	}
	return status.Errorf(codes.Unavailable, "shard %s: its primary, member %s at %s, is unreachable: %s",
		rt.shard, rt.member.Suffix, rt.endpoint, st.Message())
}

// readLocal reads the answer from this member's replica of rt's shard.
func (s *Server) readLocal(ctx context.Context, rt route, o *op) (proto.Message, error) {
	var self = s.cfg.Member.ID().Suffix
	var since = time.Now()
	var store, replica, ok = s.cfg.Member.Replica(ctx, rt.shard)
	if !ok && ctx.Err() != nil {
		return nil, status.Errorf(codes.Unavailable, "shard %s: its primary, member %s, is still recovering it (waited %s, until the call's %v)",
			rt.shard, self, time.Since(since).Round(time.Millisecond), ctx.Err())
	} else if !ok {
		return nil, status.Errorf(codes.Unavailable, "shard %s: its primary, member %s, is not serving it (stopping, or no longer assigned)", rt.shard, self)
	}
	var answer proto.Message
	var err = store.ReadCommitted(ctx, func(r runtime.Reader) error {
		if po, ok := r.(runtime.PartitionOwner); ok && o.routed && !po.OwnsPartitionKey(o.partition) {
			return errNotOwned(rt.shard)
		}
		var err error
		answer, err = o.read(ctx, r)
		return err
	})
	switch {
	case ctx.Err() != nil:
		return nil, status.FromContextError(ctx.Err()).Err()
	case err != nil:
		if _, isStatus := status.FromError(err); isStatus {
			return nil, err
		}
		return nil, status.Errorf(codes.Unavailable, "shard %s on member %s: %v", rt.shard, self, err)
	case replica.Err() != nil:
		// Deposed while reading: its answer may be stale by now.
		return nil, status.Errorf(codes.Unavailable, "shard %s: its primary, member %s, stopped serving it", rt.shard, self)
	}
	return answer, nil
}

// conn returns the connection to the member at ep.
func (s *Server) conn(ep pb.Endpoint) (*grpc.ClientConn, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := s.conns[ep]; ok {
		return c, nil
	}
	var c, err = s.cfg.Dial(ep)
	if err != nil {
		return nil, err
	}
	s.conns[ep] = c
	return c, nil
}

// verify verifies the call's authorization, for capability READ.
func (s *Server) verify(ctx context.Context) (context.Context, context.CancelFunc, pb.Claims, error) {
	if s.cfg.Verifier == nil {
		return ctx, func() {}, pb.Claims{Capability: pb.Capability_READ}, nil
	}
	var ctx2, cancel, claims, err = s.cfg.Verifier.Verify(ctx, pb.Capability_READ)
	if err == nil {
		return ctx2, cancel, claims, nil
	} else if _, isStatus := status.FromError(err); isStatus {
		return nil, nil, claims, err // Gazette's: Unauthenticated, saying why.
	}
	return nil, nil, claims, status.Error(codes.Unauthenticated, err.Error())
}

// authorized returns an error unless claims cover reading rt's shard.
func authorized(claims pb.Claims, rt route) error {
	if !claims.Selector.Matches(rt.labels) {
		return status.Errorf(codes.PermissionDenied, "not authorized to read shard %s", rt.shard)
	}
	return nil
}

// shardClaims are the claims of a call answered by shard id.
func shardClaims(id pc.ShardID) pb.Claims {
	return pb.Claims{Capability: pb.Capability_READ, Selector: pb.LabelSelector{Include: pb.MustLabelSet("id", id.String())}}
}

// withRoute returns ctx with the outgoing metadata of a call routed by rt.
func withRoute(ctx context.Context, rt route) context.Context {
	return metadata.AppendToOutgoingContext(ctx, ShardMetadata, rt.shard.String(), RevisionMetadata, strconv.FormatInt(rt.revision, 10))
}

// revisionOf returns the revision of a call's metadata, or zero.
func revisionOf(md metadata.MD) (int64, error) {
	var v = md.Get(RevisionMetadata)
	if len(v) == 0 {
		return 0, nil
	}
	var rev, err = strconv.ParseInt(v[0], 10, 64)
	if err != nil || rev < 0 {
		return 0, status.Errorf(codes.InvalidArgument, "invalid metadata %s: %q", RevisionMetadata, v[0])
	}
	return rev, nil
}
