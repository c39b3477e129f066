package summer

import (
	"sync"

	benchv1 "github.com/gazconsumer/gazconsumer/bench/gen/gazconsumer/bench/v1"
	"github.com/gazconsumer/gazconsumer/runtime"
)

// Aggregator implements benchv1.SummerHandler as Gazette's examples write
// consumers: within a transaction it folds sums into memory, reading a
// key's row only the first time the transaction meets the key, and it
// writes each changed row once, as the transaction finalizes.
type Aggregator struct {
	mu   sync.Mutex
	sums map[runtime.Store]map[string]int64 // Of each shard's current transaction.
}

// NewAggregator returns an Aggregator.
func NewAggregator() *Aggregator {
	return &Aggregator{sums: make(map[runtime.Store]map[string]int64)}
}

var _ benchv1.SummerHandler = (*Aggregator)(nil)

// sumsOf returns the sums of the transaction of store's shard. Handlers of
// different shards run concurrently, but those of one shard never do.
func (h *Aggregator) sumsOf(store runtime.Store) map[string]int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	var sums, ok = h.sums[store]
	if !ok {
		sums = make(map[string]int64)
		h.sums[store] = sums
	}
	return sums
}

// OnAdd adds the message's value to the sum of its key, in memory.
func (h *Aggregator) OnAdd(tx *benchv1.SummerTxn, msg *benchv1.Add) error {
	var sums = h.sumsOf(tx.Store)
	var sum, ok = sums[msg.Key]
	if !ok {
		row, _, err := tx.Sum.Get(benchv1.SumKey{Key: msg.Key})
		if err != nil {
			return err
		} else if row != nil {
			sum = row.Value
		}
	}
	sums[msg.Key] = sum + msg.Value
	return nil
}

// FinalizeTxn writes the transaction's sums to table Sum.
func (h *Aggregator) FinalizeTxn(tx *benchv1.SummerTxn) error {
	var sums = h.sumsOf(tx.Store)
	for key, sum := range sums {
		delete(sums, key)
		if err := tx.Sum.Put(&benchv1.Sum{Key: key, Value: sum}); err != nil {
			return err
		}
	}
	return nil
}

// FinishTxn forgets the sums of a failed transaction, which its shard's next
// primary consumes again.
func (h *Aggregator) FinishTxn(_ runtime.Shard, store runtime.Store, err error) error {
	if err != nil {
		h.mu.Lock()
		delete(h.sums, store)
		h.mu.Unlock()
	}
	return nil
}

// BeginTxn does nothing: sums are made as the transaction meets keys.
func (h *Aggregator) BeginTxn(runtime.Shard, runtime.Store) error { return nil }

var _ runtime.BeginFinisher = (*Aggregator)(nil)
