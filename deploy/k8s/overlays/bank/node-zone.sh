#!/bin/sh
# node-zone.sh NODE prints the failure zone of Kubernetes node NODE: Gazette's
# brokers and the consumers' members run with it as their zone (ConfigMap
# gazette-zonemap, as Gazette's bases expect it). Brokers spread a journal's
# replicas across zones, and clients prefer brokers of their own zone.
#
# Every node is in one zone here, which suits journals of replication 1 (the
# example's). Replace it with the mapping of your cluster, e.g. a case on the
# node names, before raising replication: brokers place the replicas of a
# journal of replication 2 or more in at least two zones.
echo zone-a
