// Handlers of consumer gazconsumer.example.bank.v1.Ledger, declared in gazconsumer/example/bank/v1/ledger.proto.
//
// protoc-gen-gazconsumer wrote this file once, and never overwrites it: it is
// yours to edit. Generated code it relies on is in package bankv1.

// Package ledger implements consumer gazconsumer.example.bank.v1.Ledger.
package ledger

import (
	bankv1 "github.com/gazconsumer/gazconsumer/example/gen/bank/v1"
)

// Handler implements bankv1.LedgerHandler.
type Handler struct {
	bankv1.UnimplementedLedgerHandler
}

// NewLedgerHandler returns the handler of consumer gazconsumer.example.bank.v1.Ledger.
func NewLedgerHandler() *Handler { return new(Handler) }

var _ bankv1.LedgerHandler = (*Handler)(nil)

// OnOrder handles one bankv1.Order within transaction tx.
// Read and write state through the tables of tx: tx.Balance, tx.CustomerActivity.
// Publish results with tx.PublishBalanceChanged.
func (h *Handler) OnOrder(tx *bankv1.LedgerTxn, msg *bankv1.Order) error {
	return nil
}

// OnPayment handles one bankv1.Payment within transaction tx.
// Read and write state through the tables of tx: tx.Balance, tx.CustomerActivity.
// Publish results with tx.PublishBalanceChanged.
func (h *Handler) OnPayment(tx *bankv1.LedgerTxn, msg *bankv1.Payment) error {
	return nil
}

// FinalizeTxn ends transaction tx: write any state kept in memory to the
// tables of tx, and publish what the transaction is to publish.
func (h *Handler) FinalizeTxn(tx *bankv1.LedgerTxn) error {
	return nil
}
