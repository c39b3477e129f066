package leaderboard_test

import (
	"strings"
	"testing"

	bankv1 "github.com/gazconsumer/gazconsumer/example/gen/bank/v1"
	"github.com/gazconsumer/gazconsumer/example/gen/bank/v1/leaderboardtest"
	"github.com/gazconsumer/gazconsumer/example/internal/leaderboard"
)

// changed returns the event of version v of an account's balance.
func changed(customer, account string, balance int64, v uint64) *bankv1.BalanceChanged {
	return &bankv1.BalanceChanged{CustomerId: customer, AccountId: account, BalanceCents: balance, Version: v}
}

// Accounts are ranked by their latest balance, largest first.
func TestRanksByBalance(t *testing.T) {
	h := leaderboardtest.New(t, leaderboard.NewLeaderboardHandler())
	h.BalanceChanged(changed("ann", "checking", 500, 1))
	h.BalanceChanged(changed("bob", "checking", 900, 1))
	h.BalanceChanged(changed("cyd", "savings", 100, 1))
	h.BalanceChanged(changed("ann", "checking", 1200, 2))
	h.Commit()
	h.Rank.Expect(
		&bankv1.Rank{BalanceCents: 1200, CustomerId: "ann", AccountId: "checking"},
		&bankv1.Rank{BalanceCents: 900, CustomerId: "bob", AccountId: "checking"},
		&bankv1.Rank{BalanceCents: 100, CustomerId: "cyd", AccountId: "savings"},
	)
	h.Standing.Expect(
		&bankv1.Standing{CustomerId: "ann", AccountId: "checking", BalanceCents: 1200, Version: 2},
		&bankv1.Standing{CustomerId: "bob", AccountId: "checking", BalanceCents: 900, Version: 1},
		&bankv1.Standing{CustomerId: "cyd", AccountId: "savings", BalanceCents: 100, Version: 1},
	)
	// The ranks of balances within [1000, 100), largest first.
	if top := h.Rank.Range(bankv1.RankKey{BalanceCents: 1000}, bankv1.RankKey{BalanceCents: 100}); len(top) != 1 || top[0].CustomerId != "bob" {
		t.Errorf("ranks from 1000 down to 100: %v", top)
	}

	// A balance that falls moves its account down.
	h.BalanceChanged(changed("ann", "checking", 0, 3))
	h.Commit()
	if ranks := h.Rank.All(); len(ranks) != 3 || ranks[2].CustomerId != "ann" {
		t.Errorf("ranks after ann's balance fell: %v", ranks)
	}
}

// Events delivered twice are consumed once: the shard never sees a
// version repeated.
func TestDuplicateEventsAreConsumedOnce(t *testing.T) {
	h := leaderboardtest.New(t, leaderboard.NewLeaderboardHandler())
	first := h.BalanceChanged(changed("ann", "checking", 500, 1))
	h.Redeliver(first)
	h.Commit()
	h.Redeliver(first)
	h.Commit()
	h.Standing.Expect(&bankv1.Standing{CustomerId: "ann", AccountId: "checking", BalanceCents: 500, Version: 1})
}

// An event whose version does not follow the account's last fails the
// shard, naming the account, and changes nothing; so does it again once the
// shard restarts.
func TestVersionGapFailsTheShard(t *testing.T) {
	h := leaderboardtest.New(t, leaderboard.NewLeaderboardHandler())
	h.BalanceChanged(changed("ann", "checking", 500, 1))
	h.Commit()
	h.BalanceChanged(changed("ann", "checking", 700, 3))
	_, err := h.TryCommit()
	if err == nil || !strings.Contains(err.Error(), "account ann/checking: event of version 3 follows version 1") {
		t.Fatalf("TryCommit: %v", err)
	}
	h.Standing.Expect(&bankv1.Standing{CustomerId: "ann", AccountId: "checking", BalanceCents: 500, Version: 1})
	if _, err = h.TryCommit(); err == nil {
		t.Fatal("the restarted shard consumed the event of version 3")
	}
}

// A crash loses its transaction; its replay moves each account once.
func TestCrashReplaysExactlyOnce(t *testing.T) {
	h := leaderboardtest.New(t, leaderboard.NewLeaderboardHandler())
	h.BalanceChanged(changed("ann", "checking", 500, 1))
	h.Commit()
	h.BalanceChanged(changed("ann", "checking", 300, 2))
	h.BalanceChanged(changed("bob", "checking", 400, 1))
	h.Crash()
	h.Rank.Expect(&bankv1.Rank{BalanceCents: 500, CustomerId: "ann", AccountId: "checking"})
	h.Commit()
	h.Rank.Expect(
		&bankv1.Rank{BalanceCents: 400, CustomerId: "bob", AccountId: "checking"},
		&bankv1.Rank{BalanceCents: 300, CustomerId: "ann", AccountId: "checking"},
	)
	h.Standing.Expect(
		&bankv1.Standing{CustomerId: "ann", AccountId: "checking", BalanceCents: 300, Version: 2},
		&bankv1.Standing{CustomerId: "bob", AccountId: "checking", BalanceCents: 400, Version: 1},
	)
}
