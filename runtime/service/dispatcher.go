package service

import (
	"sync"

	pb "go.gazette.dev/core/broker/protocol"
	"google.golang.org/grpc/balancer"
)

var dispatcherOnce sync.Once

// registerDispatcher installs Gazette's gRPC dispatcher balancer, which
// connections to brokers are dialed with, unless the process already has
// (as a process running a devstack does). zone is the process's zone, whose
// brokers the dispatcher prefers.
func registerDispatcher(zone string) {
	dispatcherOnce.Do(func() {
		if balancer.Get(pb.DispatcherGRPCBalancerName) == nil {
			pb.RegisterGRPCDispatcher(zone)
		}
	})
}
