// Handlers of consumer edition.v1.Watcher, declared in edition/v1/events.proto.
//
// protoc-gen-gazconsumer wrote this file once, and never overwrites it: it is
// yours to edit. Generated code it relies on is in package editionv1.

// Package watcher implements consumer edition.v1.Watcher.
package watcher

import (
	acmev1 "example.test/golden/acme/v1"
	editionv1 "example.test/golden/edition/v1"
)

// Handler implements editionv1.WatcherHandler.
type Handler struct {
	editionv1.UnimplementedWatcherHandler
}

// NewWatcherHandler returns the handler of consumer edition.v1.Watcher.
func NewWatcherHandler() *Handler { return new(Handler) }

var _ editionv1.WatcherHandler = (*Handler)(nil)

// OnEvent handles one editionv1.Event within transaction tx.
// Read and write state through the tables of tx: tx.Seen.
// Publish results with tx.PublishEvent.
func (h *Handler) OnEvent(tx *editionv1.WatcherTxn, msg *editionv1.Event) error {
	return nil
}

// OnOrder handles one acmev1.Order within transaction tx.
// Read and write state through the tables of tx: tx.Seen.
// Publish results with tx.PublishEvent.
func (h *Handler) OnOrder(tx *editionv1.WatcherTxn, msg *acmev1.Order) error {
	return nil
}

// FinalizeTxn ends transaction tx: write any state kept in memory to the
// tables of tx, and publish what the transaction is to publish.
func (h *Handler) FinalizeTxn(tx *editionv1.WatcherTxn) error {
	return nil
}
