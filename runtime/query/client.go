package query

import (
	"context"
	"crypto/tls"
	"fmt"
	"strconv"
	"sync"
	"time"

	pb "go.gazette.dev/core/broker/protocol"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// Client calls the rpcs of queries services. A Client of NewClient calls
// one member, which routes each call to the shard answering it; one of
// NewRoutedClient routes each call itself, from the consumer's KeySpace in
// etcd, to the member that is the primary of its shard (and a call that
// every shard answers, to any member, which asks them). A call routed by a
// view of etcd that is no longer current (the shard's primary moved, or is
// recovering) fails with Unavailable, naming the shard: callers retry it.
// Generated clients of queries services wrap a Client. It may be used
// concurrently.
type Client struct {
	through grpc.ClientConnInterface // Of NewClient.
	router  *Router                  // Of NewRoutedClient.
	dial    func(pb.Endpoint) (*grpc.ClientConn, error)
	auth    pb.Authorizer

	mu    sync.Mutex
	conns map[pb.Endpoint]*grpc.ClientConn
}

// NewClient returns a Client calling the member that conn reaches, which
// routes each call. authorizer, if not nil, authorizes each call (see the
// package documentation): with capability READ, and a selector of the
// shard answering it, or of none if every shard answers.
func NewClient(conn grpc.ClientConnInterface, authorizer pb.Authorizer) *Client {
	return &Client{through: conn, auth: authorizer}
}

// NewRoutedClient returns a Client routing each call by router to the
// member that is the primary of the shard answering it, dialed by dial and
// kept until Close. authorizer is as NewClient's.
func NewRoutedClient(router *Router, dial func(pb.Endpoint) (*grpc.ClientConn, error), authorizer pb.Authorizer) *Client {
	return &Client{router: router, dial: dial, auth: authorizer, conns: make(map[pb.Endpoint]*grpc.ClientConn)}
}

// Close closes the connections the Client dialed.
func (c *Client) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, conn := range c.conns {
		_ = conn.Close()
	}
	c.conns = make(map[pb.Endpoint]*grpc.ClientConn)
	return nil
}

// RetryWindow bounds how long a Client retries a call that fails
// Unavailable when the call's context has no deadline.
const RetryWindow = 30 * time.Second

// The backoff between tries of a call: doubling from firstRetry to maxRetry.
const (
	firstRetry = 25 * time.Millisecond
	maxRetry   = time.Second
)

// Invoke calls rpc method of svc with req, and sets resp to its response.
// A malformed request fails with status InvalidArgument before any call.
//
// A call failing Unavailable (its shard not yet assigned, its primary
// moving or unreachable) is tried again, with backoff, until ctx's deadline
// (or for RetryWindow, if ctx has none): queries only read, so a retry is
// safe. It then fails with the last Unavailable error, which names the
// shard.
func (c *Client) Invoke(ctx context.Context, svc *Service, method string, req, resp proto.Message, opts ...grpc.CallOption) error {
	var m = svc.method(method)
	if m == nil {
		return status.Errorf(codes.Unimplemented, "service %s has no rpc %s", svc.Name, method)
	}
	var o, err = m.prepare(req)
	if err != nil {
		return err
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, RetryWindow)
		defer cancel()
	}
	var wait = firstRetry
	for {
		err = c.invoke(ctx, svc, method, o, req, resp, opts...)
		if status.Code(err) != codes.Unavailable {
			return err
		}
		var timer = time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return err
		case <-timer.C:
		}
		wait = min(2*wait, maxRetry)
	}
}

// invoke makes one try of a call of Invoke.
func (c *Client) invoke(ctx context.Context, svc *Service, method string, o *op, req, resp proto.Message, opts ...grpc.CallOption) error {
	var err error
	var conn = c.through
	var claims = pb.Claims{Capability: pb.Capability_READ}
	var rt *route // Of a call routed to a shard's primary.
	if c.router != nil {
		var ep pb.Endpoint
		var rev int64
		if o.routed {
			var id, err = c.router.shardOf(svc, o.partition)
			if err != nil {
				return err
			}
			r, err := c.router.resolve(ctx, id, 0)
			if err != nil {
				return err
			}
			rt = &r
			ep, rev, claims = rt.endpoint, rt.revision, shardClaims(id)
			ctx = metadata.AppendToOutgoingContext(ctx, ShardMetadata, id.String())
		} else if ep, rev, err = c.router.anyMember(); err != nil {
			return err
		}
		ctx = metadata.AppendToOutgoingContext(ctx, RevisionMetadata, strconv.FormatInt(rev, 10))
		if conn, err = c.conn(ep); err != nil {
			return status.Errorf(codes.Unavailable, "dialing member %s: %v", ep, err)
		}
	}
	if c.auth != nil {
		if ctx, err = c.auth.Authorize(ctx, claims, time.Minute); err != nil {
			return fmt.Errorf("authorizing the call: %w", err)
		}
	}
	var err2 = conn.Invoke(ctx, svc.FullMethod(method), req, resp, opts...)
	if err2 != nil && rt != nil {
		return unreachable(err2, *rt)
	}
	return err2
}

// conn returns the connection to the member at ep.
func (c *Client) conn(ep pb.Endpoint) (*grpc.ClientConn, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if conn, ok := c.conns[ep]; ok {
		return conn, nil
	}
	var conn, err = c.dial(ep)
	if err != nil {
		return nil, err
	}
	c.conns[ep] = conn
	return conn, nil
}

// Dialer returns a function dialing the member serving at an endpoint:
// over TLS with tlsConfig (a member's peer TLS, or a client's) if the
// endpoint is https://, in the clear if http://, and reconnecting at most
// half a second apart, as Gazette dials members (a member restarted at its
// endpoint is soon reached again).
func Dialer(tlsConfig *tls.Config) func(pb.Endpoint) (*grpc.ClientConn, error) {
	var params = grpc.ConnectParams{Backoff: backoff.DefaultConfig}
	params.Backoff.MaxDelay = 500 * time.Millisecond
	return func(ep pb.Endpoint) (*grpc.ClientConn, error) {
		if err := ep.Validate(); err != nil {
			return nil, err
		}
		return grpc.NewClient(ep.GRPCAddr(),
			grpc.WithTransportCredentials(pb.NewDispatchedCredentials(tlsConfig, ep)),
			grpc.WithConnectParams(params))
	}
}
