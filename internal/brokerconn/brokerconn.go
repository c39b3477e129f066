// Package brokerconn dials Gazette brokers the way Gazette's own clients do,
// for the stack, the runtime and the commands alike.
package brokerconn

import (
	"crypto/tls"
	"fmt"
	"math"

	"go.gazette.dev/core/auth"
	pb "go.gazette.dev/core/broker/protocol"
	"google.golang.org/grpc"
)

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
