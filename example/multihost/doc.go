// Package multihost holds the example bank's test across hosts: etcd, three
// Gazette brokers and the ledger and leaderboard members, each on a host of
// its own (a Linux network namespace), over mutual TLS with authorization,
// through a broker host going down, a member cut off past its lease and a
// member killed. It needs root (to make the namespaces), and runs with
// `make test-multihost` (go test -tags multihost).
package multihost
