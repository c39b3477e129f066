// Handlers of consumer gazconsumer.example.bank.v1.Leaderboard, declared in gazconsumer/example/bank/v1/leaderboard.proto.
//
// protoc-gen-gazconsumer wrote this file once, and never overwrites it: it is
// yours to edit. Generated code it relies on is in package bankv1.

// Package leaderboard implements consumer
// gazconsumer.example.bank.v1.Leaderboard: it ranks accounts by the balances
// of the ledger's BalanceChanged events.
package leaderboard

import (
	"fmt"

	bankv1 "github.com/gazconsumer/gazconsumer/example/gen/bank/v1"
)

// Handler implements bankv1.LeaderboardHandler.
type Handler struct{}

// NewLeaderboardHandler returns the handler of consumer gazconsumer.example.bank.v1.Leaderboard.
func NewLeaderboardHandler() *Handler { return new(Handler) }

var _ bankv1.LeaderboardHandler = (*Handler)(nil)

// OnBalanceChanged moves the account from the rank of its previous balance
// to that of its new one.
//
// Events of an account must arrive exactly once and in order, versions 1,
// 2, 3, ...: they do, as the ledger publishes them in order within its
// transactions and this consumer reads them read-committed. Any other
// version fails the shard, naming the account, rather than rank it wrong.
func (h *Handler) OnBalanceChanged(tx *bankv1.LeaderboardTxn, msg *bankv1.BalanceChanged) error {
	key := bankv1.StandingKey{CustomerId: msg.CustomerId, AccountId: msg.AccountId}
	st, found, err := tx.Standing.Get(key)
	if err != nil {
		return err
	} else if !found {
		st = &bankv1.Standing{CustomerId: msg.CustomerId, AccountId: msg.AccountId}
	}
	if msg.Version != st.Version+1 {
		return fmt.Errorf("account %s/%s: event of version %d follows version %d: events were lost, repeated or reordered",
			msg.CustomerId, msg.AccountId, msg.Version, st.Version)
	}
	if found {
		if err := tx.Rank.Delete(bankv1.RankKey{BalanceCents: st.BalanceCents, CustomerId: st.CustomerId, AccountId: st.AccountId}); err != nil {
			return err
		}
	}
	st.BalanceCents, st.Version = msg.BalanceCents, msg.Version
	if err := tx.Standing.Put(st); err != nil {
		return err
	}
	return tx.Rank.Put(&bankv1.Rank{BalanceCents: st.BalanceCents, CustomerId: st.CustomerId, AccountId: st.AccountId})
}

// FinalizeTxn has nothing to do: the handler keeps no state in memory.
func (h *Handler) FinalizeTxn(tx *bankv1.LeaderboardTxn) error {
	return nil
}
