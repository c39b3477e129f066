// Handlers of consumer gazconsumer.example.bank.v1.Ledger, declared in gazconsumer/example/bank/v1/ledger.proto.
//
// protoc-gen-gazconsumer wrote this file once, and never overwrites it: it is
// yours to edit. Generated code it relies on is in package bankv1.

// Package ledger implements consumer gazconsumer.example.bank.v1.Ledger: it
// applies orders and payments to the balances of customers' accounts, totals
// each customer's activity in the same transaction, and publishes every
// change of a balance as a BalanceChanged event. It holds each order's
// amount until the order's payment comes, and refunds it (a change of the
// balance, caused by "release:" and the order's id) if none comes within
// its hold window; it records each time an account falls idle; and it
// refuses invalid payments, which its failure policy records as dead
// letters.
package ledger

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	bankv1 "github.com/gazconsumer/gazconsumer/example/gen/bank/v1"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// DefaultHoldWindow is how long an order's amount is held for its payment,
// unless the handler is told otherwise (WithHoldWindow).
const DefaultHoldWindow = 10 * time.Minute

// ReleaseCause prefixes the cause_id of the BalanceChanged event of a hold's
// release: the order's id follows.
const ReleaseCause = "release:"

// ErrInvalidPayment is the error of a payment without an account or of an
// amount that is not positive.
var ErrInvalidPayment = errors.New("invalid payment")

// Handler implements bankv1.LedgerHandler.
type Handler struct {
	holdWindow time.Duration
}

// NewLedgerHandler returns the handler of consumer gazconsumer.example.bank.v1.Ledger.
func NewLedgerHandler() *Handler { return &Handler{holdWindow: DefaultHoldWindow} }

// WithHoldWindow sets how long h holds an order's amount for its payment,
// and returns h.
func (h *Handler) WithHoldWindow(d time.Duration) *Handler {
	h.holdWindow = d
	return h
}

var _ bankv1.LedgerHandler = (*Handler)(nil)

// OnOrder charges an order to its account, and holds its amount until its
// payment comes: unless it came first, the hold's ReleaseHold timer is set
// to fire a hold window later.
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
	if err := change(tx, msg.CustomerId, msg.AccountId, -msg.AmountCents, msg.OrderId, msg.PlacedAt); err != nil {
		return err
	}
	var key = bankv1.HoldKey{CustomerId: msg.CustomerId, OrderId: msg.OrderId}
	hold, found, err := tx.Hold.Get(key)
	if err != nil {
		return err
	} else if found && hold.Paid {
		return tx.Hold.Delete(key) // Paid already.
	}
	if err = tx.Hold.Put(&bankv1.Hold{CustomerId: msg.CustomerId, OrderId: msg.OrderId, AccountId: msg.AccountId, AmountCents: msg.AmountCents}); err != nil {
		return err
	}
	return tx.ReleaseHoldTimers.SetAfter(&bankv1.ReleaseHold{
		CustomerId: msg.CustomerId, OrderId: msg.OrderId, AccountId: msg.AccountId, AmountCents: msg.AmountCents,
	}, h.holdWindow)
}

// OnPayment credits a payment to its account, and ends the hold of the
// order it pays, if it pays one (or, if the order has not come yet, leaves
// a hold marked paid). It fails on an invalid payment (ErrInvalidPayment),
// which the rpc's failure policy records as a dead letter.
func (h *Handler) OnPayment(tx *bankv1.LedgerTxn, msg *bankv1.Payment) error {
	if msg.CustomerId == "" || msg.AccountId == "" || msg.AmountCents <= 0 {
		return fmt.Errorf("payment %s of %s/%s of %d cents: %w", msg.PaymentId, msg.CustomerId, msg.AccountId, msg.AmountCents, ErrInvalidPayment)
	}
	if msg.OrderId != "" {
		if err := h.pay(tx, msg); err != nil {
			return err
		}
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

// pay ends the hold of the order msg pays, cancelling its timer, or marks
// it paid if the order has not come yet.
func (h *Handler) pay(tx *bankv1.LedgerTxn, msg *bankv1.Payment) error {
	var key = bankv1.HoldKey{CustomerId: msg.CustomerId, OrderId: msg.OrderId}
	var _, found, err = tx.Hold.Get(key)
	if err != nil {
		return err
	} else if !found {
		return tx.Hold.Put(&bankv1.Hold{CustomerId: msg.CustomerId, OrderId: msg.OrderId, AccountId: msg.AccountId, AmountCents: msg.AmountCents, Paid: true})
	}
	if _, err = tx.ReleaseHoldTimers.Cancel(bankv1.ReleaseHoldKey{CustomerId: msg.CustomerId, OrderId: msg.OrderId}); err != nil {
		return err
	}
	return tx.Hold.Delete(key)
}

// OnReleaseHold releases the hold of an order not paid within the hold
// window: it refunds the order's amount to its account.
func (h *Handler) OnReleaseHold(tx *bankv1.LedgerTxn, msg *bankv1.ReleaseHold) error {
	var key = bankv1.HoldKey{CustomerId: msg.CustomerId, OrderId: msg.OrderId}
	var hold, found, err = tx.Hold.Get(key)
	if err != nil {
		return err
	} else if !found || hold.Paid {
		// A payment cancels the timer as it ends the hold: never so.
		return fmt.Errorf("the hold of order %s of %s fell due, but the ledger holds %v", msg.OrderId, msg.CustomerId, hold)
	} else if err = tx.Hold.Delete(key); err != nil {
		return err
	}
	return change(tx, msg.CustomerId, msg.AccountId, msg.AmountCents, ReleaseCause+msg.OrderId, timestamppb.New(tx.Now()))
}

// OnExpireRecentAccount records that an account fell idle: its balance's
// version as it did joins its IdleAccount row.
func (h *Handler) OnExpireRecentAccount(tx *bankv1.LedgerTxn, row *bankv1.RecentAccount) error {
	var key = bankv1.IdleAccountKey{CustomerId: row.CustomerId, AccountId: row.AccountId}
	var idle, found, err = tx.IdleAccount.Get(key)
	if err != nil {
		return err
	} else if !found {
		idle = &bankv1.IdleAccount{CustomerId: row.CustomerId, AccountId: row.AccountId}
	}
	idle.Versions = append(idle.Versions, row.Version)
	return tx.IdleAccount.Put(idle)
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

// change adds delta to the balance of the account, publishes the change, and
// marks the account changed lately (RecentAccount), until it is left idle.
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
	} else if err = tx.RecentAccount.Put(&bankv1.RecentAccount{CustomerId: customer, AccountId: account, Version: bal.Version}); err != nil {
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
