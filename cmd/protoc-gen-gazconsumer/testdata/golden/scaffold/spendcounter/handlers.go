// Handlers of consumer acme.v1.SpendCounter, declared in acme/v1/consumer.proto.
//
// protoc-gen-gazconsumer wrote this file once, and never overwrites it: it is
// yours to edit. Generated code it relies on is in package acmev1.

// Package spendcounter implements consumer acme.v1.SpendCounter.
package spendcounter

import (
	acmev1 "example.test/golden/acme/v1"
)

// Handler implements acmev1.SpendCounterHandler.
type Handler struct {
	acmev1.UnimplementedSpendCounterHandler
}

// NewSpendCounterHandler returns the handler of consumer acme.v1.SpendCounter.
func NewSpendCounterHandler() *Handler { return new(Handler) }

var _ acmev1.SpendCounterHandler = (*Handler)(nil)

// OnOrder handles one acmev1.Order within transaction tx.
// Read and write state through the tables of tx: tx.Spend, tx.DailySpend.
// Publish results with tx.PublishTotal.
func (h *Handler) OnOrder(tx *acmev1.SpendCounterTxn, msg *acmev1.Order) error {
	return nil
}

// FinalizeTxn ends transaction tx: write any state kept in memory to the
// tables of tx, and publish what the transaction is to publish.
func (h *Handler) FinalizeTxn(tx *acmev1.SpendCounterTxn) error {
	return nil
}
