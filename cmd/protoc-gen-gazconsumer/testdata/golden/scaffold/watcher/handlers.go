// Scaffold of consumer edition.v1.Watcher, written once by protoc-gen-gazconsumer.

// Handlers of consumer edition.v1.Watcher, declared in edition/v1/events.proto.
//
// protoc-gen-gazconsumer wrote this file once, and never overwrites it: it is
// yours to edit. Generated code it relies on is in package editionv1.

// Package watcher implements consumer edition.v1.Watcher.
package watcher

import (
	"errors"

	acmev1 "example.test/golden/acme/v1"
	editionv1 "example.test/golden/edition/v1"
)

// Handler implements editionv1.WatcherHandler. It must have a method
// for every rpc of the consumer: one that is missing, or added to the .proto
// since, is a compile error on the line below.
type Handler struct{}

// NewWatcherHandler returns the handler of consumer edition.v1.Watcher.
func NewWatcherHandler() *Handler { return new(Handler) }

var _ editionv1.WatcherHandler = (*Handler)(nil)

// OnEvent handles one editionv1.Event within transaction tx.
// Read and write state through the tables of tx: tx.Seen.
// Publish results with tx.PublishEvent.
//
// Until it is written, it fails: the shard stops at the first editionv1.Event,
// naming its journal and offset, and never commits past it.
func (h *Handler) OnEvent(tx *editionv1.WatcherTxn, msg *editionv1.Event) error {
	return notImplemented("OnEvent")
}

// OnOrder handles one acmev1.Order within transaction tx.
// Read and write state through the tables of tx: tx.Seen.
// Publish results with tx.PublishEvent.
//
// Until it is written, it fails: the shard stops at the first acmev1.Order,
// naming its journal and offset, and never commits past it.
func (h *Handler) OnOrder(tx *editionv1.WatcherTxn, msg *acmev1.Order) error {
	return notImplemented("OnOrder")
}

// FinalizeTxn ends transaction tx: write any state kept in memory to the
// tables of tx, and publish what the transaction is to publish.
func (h *Handler) FinalizeTxn(tx *editionv1.WatcherTxn) error {
	return nil
}

// notImplemented is the error of a handler stub not yet written.
func notImplemented(method string) error {
	return errors.New("watcher: " + method + " is not implemented")
}
