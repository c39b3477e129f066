package service_test

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/gazconsumer/gazconsumer/runtime/service"
	"go.gazette.dev/core/auth"
	pb "go.gazette.dev/core/broker/protocol"
	"google.golang.org/grpc"
	channelzpb "google.golang.org/grpc/channelz/grpc_channelz_v1"
	channelzsvc "google.golang.org/grpc/channelz/service"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"
)

// testService answers with the capability of the call's verified claims.
type testService struct {
	testgrpc.UnimplementedTestServiceServer
}

func (testService) EmptyCall(context.Context, *testgrpc.Empty) (*testgrpc.Empty, error) {
	return new(testgrpc.Empty), nil
}

func (testService) UnaryCall(ctx context.Context, _ *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
	var claims, ok = service.ClaimsFromContext(ctx)
	if !ok {
		return nil, errors.New("the call has no verified claims")
	}
	return &testgrpc.SimpleResponse{Username: fmt.Sprint(uint32(claims.Capability))}, nil
}

func (testService) StreamingOutputCall(req *testgrpc.StreamingOutputCallRequest, stream testgrpc.TestService_StreamingOutputCallServer) error {
	if _, ok := service.ClaimsFromContext(stream.Context()); !ok {
		return errors.New("the call has no verified claims")
	}
	for range req.ResponseParameters {
		if err := stream.Send(new(testgrpc.StreamingOutputCallResponse)); err != nil {
			return err
		}
	}
	return nil
}

// An application's services are served on the member's port; each call is
// verified by the member's keys, for READ unless the application asked for
// another capability.
func TestApplicationServicesAreVerified(t *testing.T) {
	var ctx, cancel = context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var keyed, err = auth.NewKeyedAuth(base64.StdEncoding.EncodeToString([]byte("services test key, 32 bytes long")))
	must(t, err)
	var c = newCluster(t, 1)
	c.Verifier, c.Authorizer = keyed, keyed
	c.Services = func(r *service.Registrar) {
		testgrpc.RegisterTestServiceServer(r, testService{})
		channelzsvc.RegisterChannelzServiceToServer(r.WithCapability(pb.Capability_APPLY))
	}
	var m = start(t, c, "member-a")

	conn, err := grpc.NewClient(m.Svc.Endpoint().GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	must(t, err)
	defer conn.Close()
	var tc = testgrpc.NewTestServiceClient(conn)
	var cz = channelzpb.NewChannelzClient(conn)
	var token = func(capability pb.Capability) context.Context {
		var tctx, err = keyed.Authorize(ctx, pb.Claims{Capability: capability}, time.Minute)
		must(t, err)
		return tctx
	}
	var wantCode = func(what string, err error, want codes.Code) {
		t.Helper()
		if got := status.Code(err); got != want {
			t.Errorf("%s: %v (%s), want %s", what, err, got, want)
		}
	}

	// Without a token: refused.
	_, err = tc.EmptyCall(ctx, new(testgrpc.Empty))
	wantCode("unary call without a token", err, codes.Unauthenticated)
	stream, err := tc.StreamingOutputCall(ctx, &testgrpc.StreamingOutputCallRequest{ResponseParameters: make([]*testgrpc.ResponseParameters, 2)})
	if err == nil {
		_, err = stream.Recv()
	}
	wantCode("stream without a token", err, codes.Unauthenticated)
	// With a token the member's keys did not sign: refused.
	other, err := auth.NewKeyedAuth(base64.StdEncoding.EncodeToString([]byte("another key, not the member's...")))
	must(t, err)
	otherCtx, err := other.Authorize(ctx, pb.Claims{Capability: pb.Capability_READ}, time.Minute)
	must(t, err)
	_, err = tc.EmptyCall(otherCtx, new(testgrpc.Empty))
	wantCode("unary call with a foreign token", err, codes.Unauthenticated)

	// With a READ token: answered, and the service sees the claims.
	_, err = tc.EmptyCall(token(pb.Capability_READ), new(testgrpc.Empty))
	wantCode("unary call with a READ token", err, codes.OK)
	resp, err := tc.UnaryCall(token(pb.Capability_READ), new(testgrpc.SimpleRequest))
	must(t, err)
	if resp.Username != fmt.Sprint(uint32(pb.Capability_READ)) {
		t.Errorf("the service saw capability %s, want READ (%d)", resp.Username, pb.Capability_READ)
	}
	stream, err = tc.StreamingOutputCall(token(pb.Capability_READ), &testgrpc.StreamingOutputCallRequest{ResponseParameters: make([]*testgrpc.ResponseParameters, 2)})
	must(t, err)
	var n int
	for {
		if _, err = stream.Recv(); err != nil {
			break
		}
		n++
	}
	if err != io.EOF || n != 2 {
		t.Errorf("stream with a READ token: %d responses, then %v; want 2, then EOF", n, err)
	}

	// A service registered for APPLY refuses READ, and answers APPLY.
	_, err = cz.GetTopChannels(token(pb.Capability_READ), new(channelzpb.GetTopChannelsRequest))
	wantCode("channelz with a READ token", err, codes.Unauthenticated)
	_, err = cz.GetTopChannels(token(pb.Capability_APPLY), new(channelzpb.GetTopChannelsRequest))
	wantCode("channelz with an APPLY token", err, codes.OK)

	// The health service reports on the application's services.
	checkReady(t, m, 200)
	if got := healthOf(t, m, "grpc.testing.TestService", "grpc.channelz.v1.Channelz"); got["grpc.testing.TestService"] != healthpb.HealthCheckResponse_SERVING || got["grpc.channelz.v1.Channelz"] != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("health of the application's services: %v", got)
	}
}

// A service that the member serves already, or that the application
// registers twice, fails the member's construction, naming it.
func TestApplicationServiceRegisteredTwice(t *testing.T) {
	var c = newCluster(t, 1)
	c.Services = func(r *service.Registrar) {
		testgrpc.RegisterTestServiceServer(r, testService{})
		testgrpc.RegisterTestServiceServer(r, testService{})
	}
	var _, err = c.Start("member-a")
	if err == nil || !strings.Contains(err.Error(), "grpc.testing.TestService is registered twice") {
		t.Fatalf("Start: %v", err)
	}
	c.Services = func(r *service.Registrar) {
		healthpb.RegisterHealthServer(r, healthpb.UnimplementedHealthServer{})
	}
	if _, err = c.Start("member-b"); err == nil || !strings.Contains(err.Error(), "grpc.health.v1.Health") {
		t.Fatalf("Start: %v", err)
	}
}

// Registering once the member is built panics, as gRPC servers do.
func TestRegistrarClosesOnceServed(t *testing.T) {
	var c = newCluster(t, 1)
	var reg *service.Registrar
	c.Services = func(r *service.Registrar) { reg = r }
	start(t, c, "member-a")
	defer func() {
		if recover() == nil {
			t.Error("RegisterService after service.New did not panic")
		}
	}()
	testgrpc.RegisterTestServiceServer(reg, testService{})
}
