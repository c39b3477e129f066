// Scaffold of consumer acme.v1.SpendCounter, written once by protoc-gen-gazconsumer.

// Handlers of consumer acme.v1.SpendCounter, declared in acme/v1/consumer.proto.
//
// protoc-gen-gazconsumer wrote this file once, and never overwrites it: it is
// yours to edit. Generated code it relies on is in package acmev1.

// Package spendcounter implements consumer acme.v1.SpendCounter.
package spendcounter

import (
	"errors"

	acmev1 "example.test/golden/acme/v1"
)

// Handler implements acmev1.SpendCounterHandler. It must have a method
// for every rpc of the consumer: one that is missing, or added to the .proto
// since, is a compile error on the line below.
type Handler struct{}

// NewSpendCounterHandler returns the handler of consumer acme.v1.SpendCounter.
func NewSpendCounterHandler() *Handler { return new(Handler) }

var _ acmev1.SpendCounterHandler = (*Handler)(nil)

// OnOrder handles one acmev1.Order within transaction tx.
// Read and write state through the tables of tx: tx.Spend, tx.DailySpend.
// Publish results with tx.PublishTotal.
//
// Until it is written, it fails: the shard stops at the first acmev1.Order,
// naming its journal and offset, and never commits past it.
func (h *Handler) OnOrder(tx *acmev1.SpendCounterTxn, msg *acmev1.Order) error {
	return notImplemented("OnOrder")
}

// OnReminder handles the firing of a acmev1.Reminder timer within transaction tx.
// Read and write state through the tables of tx: tx.Spend, tx.DailySpend.
// Publish results with tx.PublishTotal.
//
// Until it is written, it fails: the shard stops at the first firing.
func (h *Handler) OnReminder(tx *acmev1.SpendCounterTxn, msg *acmev1.Reminder) error {
	return notImplemented("OnReminder")
}

// FinalizeTxn ends transaction tx: write any state kept in memory to the
// tables of tx, and publish what the transaction is to publish.
func (h *Handler) FinalizeTxn(tx *acmev1.SpendCounterTxn) error {
	return nil
}

// notImplemented is the error of a handler stub not yet written.
func notImplemented(method string) error {
	return errors.New("spendcounter: " + method + " is not implemented")
}
