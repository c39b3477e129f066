package devstack

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"go.gazette.dev/core/broker/http_gateway"
	pb "go.gazette.dev/core/broker/protocol"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

// gateway returns the HTTP gateway of a broker (Gazette's http_gateway:
// GET and HEAD read a journal, PUT appends to it) over conn, the broker's
// loopback.
//
// `gazette serve` hands its gateway a client that signs every request with
// the broker's own key: with authorization keys but no TLS, anyone who
// reaches the port reads and appends any journal. With Options.AuthKeys the
// stack's gateway instead verifies each request's Authorization header
// (`Bearer <token>`, a token as the gRPC port takes) for the capability its
// method needs (READ for GET and HEAD, APPEND for PUT), refusing an unsigned
// or invalid one with 401 before anything is read or appended, and forwards
// the token itself, never the broker's, so that the broker checks its
// claims (the journals its selector covers) as it checks a gRPC call's.
// Without keys, the gateway is open, as the gRPC port is.
func (s *Stack) gateway(conn *grpc.ClientConn) http.Handler {
	if s.opts.AuthKeys == "" {
		var lo = pb.NewAuthJournalClient(pb.NewJournalClient(conn), s.authorizer)
		return http_gateway.NewGateway(pb.NewRoutedJournalClient(lo, pb.NoopDispatchRouter{}))
	}
	var lo = pb.NewAuthJournalClient(pb.NewJournalClient(conn), forwardToken{})
	var gw = http_gateway.NewGateway(pb.NewRoutedJournalClient(lo, pb.NoopDispatchRouter{}))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var require pb.Capability
		switch r.Method {
		case http.MethodGet, http.MethodHead:
			require = pb.Capability_READ
		case http.MethodPut:
			require = pb.Capability_APPEND
		default:
			gw.ServeHTTP(w, r) // Refused by the gateway.
			return
		}
		var token = r.Header.Get("Authorization")
		if token == "" {
			w.Header().Set("WWW-Authenticate", "Bearer")
			http.Error(w, "the brokers require authorization: this request has no Authorization: Bearer token", http.StatusUnauthorized)
			return
		}
		var ctx = metadata.NewIncomingContext(r.Context(), metadata.Pairs("authorization", token))
		var _, cancel, _, err = s.verifier.Verify(ctx, require)
		if err != nil {
			w.Header().Set("WWW-Authenticate", "Bearer")
			http.Error(w, fmt.Sprintf("verifying Authorization: %v", err), http.StatusUnauthorized)
			return
		}
		cancel()
		gw.ServeHTTP(w, r)
	})
}

// forwardToken is an Authorizer which forwards the Authorization of the
// incoming request of ctx (the gateway sets it from the HTTP request's
// header), rather than signing claims of its own: a request without one
// goes unsigned, and the broker refuses it.
type forwardToken struct{}

// Authorize attaches the incoming Authorization of ctx to its outgoing
// metadata.
func (forwardToken) Authorize(ctx context.Context, _ pb.Claims, _ time.Duration) (context.Context, error) {
	var md, _ = metadata.FromIncomingContext(ctx)
	if v := md.Get("authorization"); len(v) != 0 {
		return metadata.AppendToOutgoingContext(ctx, "authorization", v[0]), nil
	}
	return ctx, nil
}
