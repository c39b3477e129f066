// Package brokerconn dials Gazette brokers the way Gazette's own clients do,
// for the stack, the runtime and the commands alike.
package brokerconn

import (
	"crypto/tls"
	"fmt"
	"math"
	"sync"

	"go.gazette.dev/core/auth"
	pb "go.gazette.dev/core/broker/protocol"
	"google.golang.org/grpc"
	"google.golang.org/grpc/balancer"
)

var dispatcherOnce sync.Once

// RegisterDispatcher installs Gazette's gRPC dispatcher balancer, which Dial
// dials connections with, unless the process already has (as a process
// running a devstack does). zone is the process's zone, whose brokers the
// dispatcher prefers. Call it before Dial.
func RegisterDispatcher(zone string) {
	dispatcherOnce.Do(func() {
		if balancer.Get(pb.DispatcherGRPCBalancerName) == nil {
			pb.RegisterGRPCDispatcher(zone)
		}
	})
}

// Security is how a client authenticates to brokers and is authorized by
// them. Its zero value dials without client certificates, trusting the
// system's CAs for https:// endpoints, and sends no authorization.
type Security struct {
	// TLS of the connection to an https:// endpoint: client certificates
	// and trusted CAs (server.BuildTLSConfig builds it from files).
	TLS *tls.Config
	// Auth authorizes each request: Gazette's auth.NewKeyedAuth signs
	// tokens with a shared key, auth.NewBearerAuth sends a given token.
	Auth pb.Authorizer
}

// Dial returns a journal client of the broker at ep, which routes with
// router, and the connection to close when done. The connection uses
// Gazette's dispatcher balancer, so RPCs carrying a route go straight to the
// route's members.
func Dial(ep pb.Endpoint, router pb.DispatchRouter) (pb.RoutedJournalClient, *grpc.ClientConn, error) {
	return DialSecure(ep, router, Security{})
}

// DialSecure is Dial with the client's Security.
func DialSecure(ep pb.Endpoint, router pb.DispatchRouter, sec Security) (pb.RoutedJournalClient, *grpc.ClientConn, error) {
	var tlsConfig = sec.TLS
	if tlsConfig == nil {
		tlsConfig = &tls.Config{}
	}
	var authorizer = sec.Auth
	if authorizer == nil {
		authorizer = auth.NewNoopAuth()
	}
	var conn, err = grpc.NewClient(ep.GRPCAddr(),
		grpc.WithTransportCredentials(pb.NewDispatchedCredentials(tlsConfig, ep)),
		// Readers stream many journals at once over one connection: rely on
		// per-stream flow control only, as Gazette's own clients do.
		grpc.WithInitialConnWindowSize(math.MaxInt32),
		grpc.WithDefaultServiceConfig(fmt.Sprintf(`{"loadBalancingConfig": [{"%s":{}}]}`, pb.DispatcherGRPCBalancerName)),
		grpc.WithDefaultCallOptions(grpc.ForceCodecV2(codec{})),
	)
	if err != nil {
		return nil, nil, fmt.Errorf("dialing broker %s: %w", ep, err)
	}
	var jc = pb.NewAuthJournalClient(pb.NewJournalClient(conn), authorizer)
	return pb.NewRoutedJournalClient(jc, router), conn, nil
}
