package service

import (
	"go.gazette.dev/core/allocator"
	pc "go.gazette.dev/core/consumer/protocol"
	"go.gazette.dev/core/keyspace"
)

// shardIsConsistent tells the allocator whether a shard's assignment may be
// counted on: a replica that is still starting or back-filling its recovery
// log is not ready to take over. A failed replica is as good as any other
// when the primary has failed too, so that failed shards may be moved.
func shardIsConsistent(_ allocator.Item, asn keyspace.KeyValue, all keyspace.KeyValues) bool {
	switch asn.Decoded.(allocator.Assignment).AssignmentValue.(*pc.ReplicaStatus).Code {
	case pc.ReplicaStatus_STANDBY, pc.ReplicaStatus_PRIMARY:
		return true
	case pc.ReplicaStatus_FAILED:
		for _, a := range all {
			var d = a.Decoded.(allocator.Assignment)
			if d.Slot == 0 {
				return d.AssignmentValue.(*pc.ReplicaStatus).Code == pc.ReplicaStatus_FAILED
			}
		}
		return false
	default: // IDLE, BACKFILL.
		return false
	}
}
