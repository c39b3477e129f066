package service

import (
	"errors"
	"expvar"
	"fmt"
	"net/http"
	"net/http/pprof"
	"slices"
	"strings"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.gazette.dev/core/allocator"
	pc "go.gazette.dev/core/consumer/protocol"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// ErrNotReady is wrapped by the errors of Service.Ready.
var ErrNotReady = errors.New("member is not ready")

// serveDiagnostics registers the member's HTTP diagnostics on a mux of its
// own (not http.DefaultServeMux, as Gazette's mainboilerplate does: several
// members may share a process, and each answers /debug/ready for itself),
// and the gRPC health service on its gRPC server.
func (s *Service) serveDiagnostics() {
	var mux = http.NewServeMux()
	mux.Handle("/metrics", promhttp.Handler())
	mux.Handle("/debug/metrics", promhttp.Handler())
	mux.HandleFunc("/debug/ready", s.serveReady)
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	mux.Handle("/debug/vars", expvar.Handler())
	s.srv.HTTPMux = mux

	s.health = health.NewServer()
	healthpb.RegisterHealthServer(s.srv.GRPCServer, s.health)
	s.health.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING)
}

// healthServices are the names of the services the gRPC health service
// reports on: "" (the member as a whole) and each service of its gRPC
// server but the health service itself.
func (s *Service) healthServices() []string {
	var names = []string{""}
	for name := range s.srv.GRPCServer.GetServiceInfo() {
		if name != healthpb.Health_ServiceDesc.ServiceName {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}

// serveReady answers 200 if the member is ready, and 503 with the reason
// otherwise.
func (s *Service) serveReady(w http.ResponseWriter, _ *http.Request) {
	if err := s.Ready(); err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = fmt.Fprintln(w, "ready")
}

// Ready returns nil if the member is ready: it has joined its group (taken
// its etcd lease, announced itself and loaded the KeySpace), is not
// exiting, and, unless Config.ReadyIgnoresFailed, no replica of a shard
// assigned to it is FAILED. Otherwise it returns an error wrapping
// ErrNotReady that says why, naming the failed shards. The member serves it
// at /debug/ready and through the gRPC health service.
func (s *Service) Ready() error {
	if !s.joined.Load() {
		return fmt.Errorf("%w: member %s has not joined its group yet (taking its etcd lease, announcing itself, loading shards and assignments)", ErrNotReady, s.cfg.ID)
	}
	s.ks.Mu.RLock()
	defer s.ks.Mu.RUnlock()
	return s.readyLocked()
}

// readyLocked is Ready, once the member has joined, under ks.Mu.
func (s *Service) readyLocked() error {
	if s.exiting.Load() {
		return fmt.Errorf("%w: member %s is exiting", ErrNotReady, s.cfg.ID)
	}
	if s.cfg.ReadyIgnoresFailed {
		return nil
	}
	var failed []string
	for _, li := range s.state.LocalItems {
		var asn = li.Assignments[li.Index].Decoded.(allocator.Assignment)
		var status = asn.AssignmentValue.(*pc.ReplicaStatus)
		if status.Code == pc.ReplicaStatus_FAILED {
			failed = append(failed, fmt.Sprintf("shard %s is FAILED: %s", asn.ItemID, strings.Join(status.Errors, "; ")))
		}
	}
	if len(failed) != 0 {
		return fmt.Errorf("%w: member %s: %s", ErrNotReady, s.cfg.ID, strings.Join(failed, "; "))
	}
	return nil
}

// updateHealth sets the statuses of the gRPC health service from
// readiness. It's a KeySpace observer (called under ks.Mu's write lock),
// and is also called under its read lock as the member joins and exits.
func (s *Service) updateHealth() {
	s.healthMu.Lock()
	defer s.healthMu.Unlock()
	var status = healthpb.HealthCheckResponse_SERVING
	if !s.joined.Load() || s.readyLocked() != nil {
		status = healthpb.HealthCheckResponse_NOT_SERVING
	}
	for _, name := range s.healthNames {
		s.health.SetServingStatus(name, status)
	}
}

// refreshHealth is updateHealth, taking ks.Mu's read lock.
func (s *Service) refreshHealth() {
	s.ks.Mu.RLock()
	defer s.ks.Mu.RUnlock()
	s.updateHealth()
}
