package main

import "testing"

func TestParseTxnMetrics(t *testing.T) {
	const text = `# HELP gazette_shard_transactions_total Total number of consumer transactions.
# TYPE gazette_shard_transactions_total counter
gazette_shard_transactions_total{shard="/bench/items/a"} 10
gazette_shard_transactions_total{shard="/bench/items/b"} 30
gazette_shard_read_messages_total{shard="/bench/items/a"} 4000
gazette_shard_phase_seconds_total{phase="20-consuming",shard="/bench/items/a",type="sync"} 1.5
gazette_shard_phase_seconds_total{phase="20-consuming",shard="/bench/items/b",type="sync"} 2.5
gazette_shard_phase_seconds_total{phase="30-stalled",shard="/bench/items/a",type="sync"} 0.25
gazette_shard_phase_seconds_total{phase="40-preparing",shard="/bench/items/a",type="sync"} 0.5 1700000000000
gazette_shard_phase_seconds_total{phase="50-committing",shard="/bench/items/a",type="async"} 2
gazette_shard_phase_seconds_total{phase="60-acknowledging",shard="/bench/items/a",type="async"} 7
gazette_shard_transactions_totalish{shard="x"} 99
`
	var m, err = parseTxnMetrics(text)
	if err != nil {
		t.Fatal(err)
	}
	var want = txnMetrics{txns: 40, messages: 4000, consuming: 4, stalled: 0.25, preparing: 0.5, committing: 2}
	if m != want {
		t.Errorf("got %+v, want %+v", m, want)
	}
	if got := m.meanMillis(m.consuming); got != 100 {
		t.Errorf("mean consuming %v ms, want 100", got)
	}
	if _, err = parseTxnMetrics(`gazette_shard_transactions_total{shard="a"} x`); err == nil {
		t.Error("a value that is no number parsed")
	}
}
