// Handlers of consumer gazconsumer.example.bank.v1.Ledger, declared in gazconsumer/example/bank/v1/ledger.proto.
//
// protoc-gen-gazconsumer wrote this file once, and never overwrites it: it is
// yours to edit. Generated code it relies on is in package bankv1.

// Package ledger implements consumer gazconsumer.example.bank.v1.Ledger: it
// applies orders and payments to the balances of customers' accounts, totals
// each customer's activity in the same transaction, and publishes every
// change of a balance as a BalanceChanged event.
package ledger

import (
	"fmt"
	"log/slog"

	bankv1 "github.com/gazconsumer/gazconsumer/example/gen/bank/v1"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// Handler implements bankv1.LedgerHandler.
type Handler struct{}

// NewLedgerHandler returns the handler of consumer gazconsumer.example.bank.v1.Ledger.
func NewLedgerHandler() *Handler { return new(Handler) }

var _ bankv1.LedgerHandler = (*Handler)(nil)

// OnOrder charges an order to its account.
func (h *Handler) OnOrder(tx *bankv1.LedgerTxn, msg *bankv1.Order) error {
	if !valid(tx, msg.CustomerId, msg.AccountId, msg.AmountCents) {
		return nil
	}
	act, err := activity(tx, msg.CustomerId, msg.PlacedAt)
	if err != nil {
		return err
	}
	act.Orders++
	act.OrderedCents += msg.AmountCents
	if err := tx.CustomerActivity.Put(act); err != nil {
		return err
	}
	return change(tx, msg.CustomerId, msg.AccountId, -msg.AmountCents, msg.OrderId, msg.PlacedAt)
}

// OnPayment credits a payment to its account.
func (h *Handler) OnPayment(tx *bankv1.LedgerTxn, msg *bankv1.Payment) error {
	if !valid(tx, msg.CustomerId, msg.AccountId, msg.AmountCents) {
		return nil
	}
	act, err := activity(tx, msg.CustomerId, msg.ReceivedAt)
	if err != nil {
		return err
	}
	act.Payments++
	act.PaidCents += msg.AmountCents
	if err := tx.CustomerActivity.Put(act); err != nil {
		return err
	}
	return change(tx, msg.CustomerId, msg.AccountId, msg.AmountCents, msg.PaymentId, msg.ReceivedAt)
}

// FinalizeTxn has nothing to do: the handlers keep no state in memory.
func (h *Handler) FinalizeTxn(tx *bankv1.LedgerTxn) error {
	return nil
}

// valid reports whether a message names its account and a positive amount.
// An invalid one is logged and skipped: failing the shard on it would stop
// the shard at that message for good.
func valid(tx *bankv1.LedgerTxn, customer, account string, cents int64) bool {
	if customer != "" && account != "" && cents > 0 {
		return true
	}
	slog.Warn("skipping an invalid message", "shard", tx.Shard.Spec().Id, "journal", tx.Envelope.Journal.Name,
		"offset", tx.Envelope.Begin, "customer", customer, "account", account, "cents", cents)
	return false
}

// activity returns the activity row of customer, with its latest time
// advanced to at.
func activity(tx *bankv1.LedgerTxn, customer string, at *timestamppb.Timestamp) (*bankv1.CustomerActivity, error) {
	act, found, err := tx.CustomerActivity.Get(bankv1.CustomerActivityKey{CustomerId: customer})
	if err != nil {
		return nil, err
	} else if !found {
		act = &bankv1.CustomerActivity{CustomerId: customer}
	}
	if at != nil && (act.LastAt == nil || at.AsTime().After(act.LastAt.AsTime())) {
		act.LastAt = at
	}
	return act, nil
}

// change adds delta to the balance of the account, and publishes the change.
func change(tx *bankv1.LedgerTxn, customer, account string, delta int64, cause string, at *timestamppb.Timestamp) error {
	bal, found, err := tx.Balance.Get(bankv1.BalanceKey{CustomerId: customer, AccountId: account})
	if err != nil {
		return err
	} else if !found {
		bal = &bankv1.Balance{CustomerId: customer, AccountId: account}
	}
	bal.BalanceCents += delta
	bal.Version++
	if err := tx.Balance.Put(bal); err != nil {
		return err
	}
	if err := tx.PublishBalanceChanged(&bankv1.BalanceChanged{
		CustomerId:   customer,
		AccountId:    account,
		DeltaCents:   delta,
		BalanceCents: bal.BalanceCents,
		Version:      bal.Version,
		CauseId:      cause,
		At:           at,
	}); err != nil {
		return fmt.Errorf("account %s/%s: %w", customer, account, err)
	}
	return nil
}
