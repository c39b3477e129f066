package service

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"go.gazette.dev/core/allocator"
	pc "go.gazette.dev/core/consumer/protocol"
)

// shardUpDesc describes gazette_shard_up, as Gazette's consumers export it.
var shardUpDesc = prometheus.NewDesc(
	"gazette_shard_up",
	"Indicates the processing status of a shard by this consumer.",
	[]string{"shard", "status"}, nil)

// memberReadyDesc describes gazconsumer_member_ready.
var memberReadyDesc = prometheus.NewDesc(
	"gazconsumer_member_ready",
	"1 while the member is ready (as /debug/ready answers 200: joined its group, not exiting, no FAILED shard unless --consumer.ready-ignores-failed), 0 otherwise, by member ID.",
	[]string{"member"}, nil)

// members are the Services running in the process, which memberCollector
// reports on.
var members sync.Map // Of *Service.

func init() { prometheus.MustRegister(memberCollector{}) }

// memberCollector collects, of the members running in the process,
// gazconsumer_member_ready and gazette_shard_up: 1 for each replica of a
// shard that a member runs, labelled with the shard's ID and the replica's
// status (PRIMARY, STANDBY, BACKFILL, FAILED, IDLE), as Gazette's
// consumer.Resolver collects it. Replicas of one shard with one status in
// several members of the process are one series.
type memberCollector struct{}

// Describe implements prometheus.Collector.
func (memberCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- shardUpDesc
	ch <- memberReadyDesc
}

// Collect implements prometheus.Collector.
func (memberCollector) Collect(ch chan<- prometheus.Metric) {
	type key struct{ shard, status string }
	var seen = make(map[key]bool)
	var ready = make(map[string]float64) // Of member IDs; a member ID twice in a process (in tests) is ready if all are.
	members.Range(func(m, _ any) bool {
		var s = m.(*Service)
		if _, ok := ready[s.cfg.ID]; !ok {
			ready[s.cfg.ID] = 1
		}
		if s.Ready() != nil {
			ready[s.cfg.ID] = 0
		}
		s.ks.Mu.RLock()
		for id, sh := range s.shards {
			var status = sh.Assignment().Decoded.(allocator.Assignment).AssignmentValue.(*pc.ReplicaStatus)
			seen[key{id.String(), status.Code.String()}] = true
		}
		s.ks.Mu.RUnlock()
		return true
	})
	for k := range seen {
		ch <- prometheus.MustNewConstMetric(shardUpDesc, prometheus.GaugeValue, 1, k.shard, k.status)
	}
	for id, v := range ready {
		ch <- prometheus.MustNewConstMetric(memberReadyDesc, prometheus.GaugeValue, v, id)
	}
}
