// Handlers of consumer gazconsumer.bench.v1.Summer, declared in gazconsumer/bench/v1/sums.proto.
//
// protoc-gen-gazconsumer wrote this file once, and never overwrites it: it is
// yours to edit. Generated code it relies on is in package benchv1.

// Package summer implements consumer gazconsumer.bench.v1.Summer.
package summer

import (
	benchv1 "github.com/gazconsumer/gazconsumer/bench/gen/gazconsumer/bench/v1"
)

// Handler implements benchv1.SummerHandler.
type Handler struct{}

// NewSummerHandler returns the handler of consumer gazconsumer.bench.v1.Summer.
func NewSummerHandler() *Handler { return new(Handler) }

var _ benchv1.SummerHandler = (*Handler)(nil)

// OnAdd adds the message's value to the sum of its key, as the README's
// quick start does: a Get and a Put of the key's row per message.
func (h *Handler) OnAdd(tx *benchv1.SummerTxn, msg *benchv1.Add) error {
	sum, _, err := tx.Sum.Get(benchv1.SumKey{Key: msg.Key})
	if err != nil {
		return err
	} else if sum == nil {
		sum = &benchv1.Sum{Key: msg.Key}
	}
	sum.Value += msg.Value
	return tx.Sum.Put(sum)
}

// FinalizeTxn has nothing to do: the handler keeps no state in memory.
func (h *Handler) FinalizeTxn(tx *benchv1.SummerTxn) error { return nil }
