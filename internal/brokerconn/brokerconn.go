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

// Dial returns a journal client of the broker at ep, which routes with
// router, and the connection to close when done. The connection uses
// Gazette's dispatcher balancer, so RPCs carrying a route go straight to the
// route's members.
func Dial(ep pb.Endpoint, router pb.DispatchRouter) (pb.RoutedJournalClient, *grpc.ClientConn, error) {
	var conn, err = grpc.NewClient(ep.GRPCAddr(),
		grpc.WithTransportCredentials(pb.NewDispatchedCredentials(&tls.Config{}, ep)),
		// Readers stream many journals at once over one connection: rely on
		// per-stream flow control only, as Gazette's own clients do.
		grpc.WithInitialConnWindowSize(math.MaxInt32),
		grpc.WithDefaultServiceConfig(fmt.Sprintf(`{"loadBalancingConfig": [{"%s":{}}]}`, pb.DispatcherGRPCBalancerName)),
	)
	if err != nil {
		return nil, nil, fmt.Errorf("dialing broker %s: %w", ep, err)
	}
	var jc = pb.NewAuthJournalClient(pb.NewJournalClient(conn), auth.NewNoopAuth())
	return pb.NewRoutedJournalClient(jc, router), conn, nil
}
