package query

import (
	"fmt"
	"slices"
	"strings"
	"sync"
)

// registry holds the queries services of each consumer, by its name.
var registry struct {
	sync.Mutex
	services map[string][]*Service
}

// Register registers svc as a queries service of its consumer: members of
// the consumer (runtime/service) serve the services ServicesOf returns.
// Generated code registers each queries service as its package
// initializes, so that a member's binary, which imports the package of its
// consumer, serves the consumer's queries services declared beside it. It
// panics if a service of svc's name is registered already.
func Register(svc *Service) {
	registry.Lock()
	defer registry.Unlock()
	if registry.services == nil {
		registry.services = make(map[string][]*Service)
	}
	var of = registry.services[svc.Consumer]
	if slices.ContainsFunc(of, func(s *Service) bool { return s.Name == svc.Name }) {
		panic(fmt.Sprintf("query: service %s is registered twice", svc.Name))
	}
	of = append(of, svc)
	slices.SortFunc(of, func(a, b *Service) int { return strings.Compare(a.Name, b.Name) })
	registry.services[svc.Consumer] = of
}

// ServicesOf returns the queries services registered for the consumer
// named consumer (its full protobuf name), ordered by name.
func ServicesOf(consumer string) []*Service {
	registry.Lock()
	defer registry.Unlock()
	return slices.Clone(registry.services[consumer])
}
