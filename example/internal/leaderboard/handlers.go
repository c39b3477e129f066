// Handlers of consumer gazconsumer.example.bank.v1.Leaderboard, declared in gazconsumer/example/bank/v1/leaderboard.proto.
//
// protoc-gen-gazconsumer wrote this file once, and never overwrites it: it is
// yours to edit. Generated code it relies on is in package bankv1.

// Package leaderboard implements consumer gazconsumer.example.bank.v1.Leaderboard.
package leaderboard

import (
	bankv1 "github.com/gazconsumer/gazconsumer/example/gen/bank/v1"
)

// Handler implements bankv1.LeaderboardHandler.
type Handler struct {
	bankv1.UnimplementedLeaderboardHandler
}

// NewLeaderboardHandler returns the handler of consumer gazconsumer.example.bank.v1.Leaderboard.
func NewLeaderboardHandler() *Handler { return new(Handler) }

var _ bankv1.LeaderboardHandler = (*Handler)(nil)

// OnBalanceChanged handles one bankv1.BalanceChanged within transaction tx.
// Read and write state through the tables of tx: tx.Standing, tx.Rank.
func (h *Handler) OnBalanceChanged(tx *bankv1.LeaderboardTxn, msg *bankv1.BalanceChanged) error {
	return nil
}

// FinalizeTxn ends transaction tx: write any state kept in memory to the
// tables of tx, and publish what the transaction is to publish.
func (h *Handler) FinalizeTxn(tx *bankv1.LeaderboardTxn) error {
	return nil
}
