package service

import (
	"context"
	"fmt"
	"sync"

	pb "go.gazette.dev/core/broker/protocol"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Registrar collects the gRPC services that an application serves on its
// member's port, beside the Shard API and the queries services: over the
// member's TLS, and with each call verified by the member's Verifier
// (Config.Verifier) before it reaches the service, as the Shard API's calls
// are. A call needs a token of capability READ, or of the capability that
// WithCapability gives the services registered through it; a call without
// a valid token is refused with codes.Unauthenticated. The service reads
// the call's verified claims with ClaimsFromContext (their selector, to
// authorize finer).
//
// Registrar implements grpc.ServiceRegistrar, so that generated
// registration functions (RegisterFooServer) take it. Services are
// registered before the member is built, by the application's
// constructor (runconsumer.Deps.Server); Config.Services hands them to
// service.New, after which RegisterService panics, as gRPC servers do once
// they serve.
type Registrar struct {
	shared     *registrations
	capability pb.Capability
}

type registrations struct {
	mu     sync.Mutex
	list   []registration
	served bool
}

type registration struct {
	desc       *grpc.ServiceDesc
	impl       any
	capability pb.Capability
}

var _ grpc.ServiceRegistrar = (*Registrar)(nil)

// NewRegistrar returns an empty Registrar, whose services need READ.
func NewRegistrar() *Registrar {
	return &Registrar{shared: new(registrations), capability: pb.Capability_READ}
}

// WithCapability returns a Registrar whose services need the capability
// capability (pb.Capability_READ, APPEND, APPLY, LIST, or a combination):
// the services it registers are served with those of r.
func (r *Registrar) WithCapability(capability pb.Capability) *Registrar {
	return &Registrar{shared: r.shared, capability: capability}
}

// RegisterService registers a service and its implementation, as
// grpc.Server.RegisterService does. It panics once the member is built.
func (r *Registrar) RegisterService(desc *grpc.ServiceDesc, impl any) {
	r.shared.mu.Lock()
	defer r.shared.mu.Unlock()
	if r.shared.served {
		panic("service: RegisterService of " + desc.ServiceName + " after the member was built: register the application's services before service.New")
	}
	r.shared.list = append(r.shared.list, registration{desc: desc, impl: impl, capability: r.capability})
}

// serve registers the services of r with srv, each call verified by
// verifier, and closes r to further registrations. A service that srv
// serves already (the application's twice, or one of the member's) is an
// error: gRPC would exit the process.
func (r *Registrar) serve(srv *grpc.Server, verifier pb.Verifier) error {
	r.shared.mu.Lock()
	defer r.shared.mu.Unlock()
	r.shared.served = true
	var served = srv.GetServiceInfo()
	for _, reg := range r.shared.list {
		if _, ok := served[reg.desc.ServiceName]; ok {
			return fmt.Errorf("the application's gRPC service %s is registered twice, or is one the member serves", reg.desc.ServiceName)
		}
		served[reg.desc.ServiceName] = grpc.ServiceInfo{}
	}
	for _, reg := range r.shared.list {
		srv.RegisterService(verifiedDesc(reg.desc, verifier, reg.capability), reg.impl)
	}
	return nil
}

// verifiedDesc returns a copy of desc whose handlers verify each call for
// capability before they call the service's.
func verifiedDesc(desc *grpc.ServiceDesc, verifier pb.Verifier, capability pb.Capability) *grpc.ServiceDesc {
	var d = *desc
	d.Methods = make([]grpc.MethodDesc, len(desc.Methods))
	for i, m := range desc.Methods {
		m.Handler = verifiedUnary(m.Handler, verifier, capability)
		d.Methods[i] = m
	}
	d.Streams = make([]grpc.StreamDesc, len(desc.Streams))
	for i, sd := range desc.Streams {
		sd.Handler = verifiedStream(sd.Handler, verifier, capability)
		d.Streams[i] = sd
	}
	return &d
}

// verifiedUnary wraps a unary handler: the call is verified within the
// server's interceptors (which count refused calls, as they count others),
// just before the service's method.
func verifiedUnary(h grpc.MethodHandler, verifier pb.Verifier, capability pb.Capability) grpc.MethodHandler {
	return func(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
		return h(srv, ctx, dec, func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
			var verified = func(ctx context.Context, req any) (any, error) {
				var vctx, cancel, claims, err = verify(ctx, verifier, capability)
				if err != nil {
					return nil, err
				}
				defer cancel()
				return handler(withClaims(vctx, claims), req)
			}
			if interceptor == nil {
				return verified(ctx, req)
			}
			return interceptor(ctx, req, info, verified)
		})
	}
}

// verifiedStream wraps a stream handler: the call is verified before the
// service's method runs.
func verifiedStream(h grpc.StreamHandler, verifier pb.Verifier, capability pb.Capability) grpc.StreamHandler {
	return func(srv any, stream grpc.ServerStream) error {
		var ctx, cancel, claims, err = verify(stream.Context(), verifier, capability)
		if err != nil {
			return err
		}
		defer cancel()
		return h(srv, verifiedServerStream{ServerStream: stream, ctx: withClaims(ctx, claims)})
	}
}

// verifiedServerStream is a stream whose context carries verified claims.
type verifiedServerStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s verifiedServerStream) Context() context.Context { return s.ctx }

// verify verifies a call's authorization for capability: an error is a
// status, codes.Unauthenticated unless the verifier said otherwise.
func verify(ctx context.Context, verifier pb.Verifier, capability pb.Capability) (context.Context, context.CancelFunc, pb.Claims, error) {
	var vctx, cancel, claims, err = verifier.Verify(ctx, capability)
	if err == nil {
		return vctx, cancel, claims, nil
	}
	if cancel != nil {
		cancel()
	}
	if _, isStatus := status.FromError(err); isStatus {
		return nil, nil, claims, err // Gazette's: Unauthenticated, saying why.
	}
	return nil, nil, claims, status.Error(codes.Unauthenticated, err.Error())
}

type claimsKey struct{}

func withClaims(ctx context.Context, claims pb.Claims) context.Context {
	return context.WithValue(ctx, claimsKey{}, claims)
}

// ClaimsFromContext returns the verified claims of a call of a service
// registered through a Registrar: its capability and selector (with no
// Config.Verifier, the capability required and an empty selector). It
// returns false outside such a call.
func ClaimsFromContext(ctx context.Context) (pb.Claims, bool) {
	var claims, ok = ctx.Value(claimsKey{}).(pb.Claims)
	return claims, ok
}
