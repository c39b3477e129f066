package query_test

import (
	"fmt"
	"strings"
	"sync"

	"github.com/gazconsumer/gazconsumer/keyenc"
	"github.com/gazconsumer/gazconsumer/runtime"
	"github.com/gazconsumer/gazconsumer/runtime/query"
	"github.com/gazconsumer/gazconsumer/runtime/query/internal/testpb"
	"github.com/gazconsumer/gazconsumer/runtime/table"
	pb "go.gazette.dev/core/broker/protocol"
	pc "go.gazette.dev/core/consumer/protocol"
	"go.gazette.dev/core/labels"
	"google.golang.org/protobuf/encoding/protowire"
)

// The test consumer, written as protoc-gen-gazconsumer would generate it
// from annotations of testpb's messages: a consumer reading Deposits
// (partitioned by account) into tables Entries (account, entry), Totals
// (account) and EntryAccounts (entry), and its queries service
// TestQueries.

const depositType = "gazconsumer.querytest.v1.Deposit"

// poisonEntry is the entry of a deposit that fails its shard.
const poisonEntry = "poison"

type EntryKey struct{ Account, Entry string }
type TotalKey struct{ Account string }
type EntryAccountKey struct{ Entry string }

var entriesTable = table.NewSchema(table.Def[EntryKey, *testpb.Entry]{
	Name:  "Entries",
	Key:   []string{"account", "entry"},
	KeyOf: func(r *testpb.Entry) EntryKey { return EntryKey{r.GetAccount(), r.GetEntry()} },
	Fields: func(k *EntryKey, c *table.Codec) {
		table.String(c, &k.Account, keyenc.Ascending)
		table.String(c, &k.Entry, keyenc.Ascending)
	},
	Restore: func(k *EntryKey, r *testpb.Entry) { r.Account, r.Entry = k.Account, k.Entry },
	Elided:  []protowire.Number{1, 2},
})

var totalsTable = table.NewSchema(table.Def[TotalKey, *testpb.Total]{
	Name:    "Totals",
	Key:     []string{"account"},
	KeyOf:   func(r *testpb.Total) TotalKey { return TotalKey{r.GetAccount()} },
	Fields:  func(k *TotalKey, c *table.Codec) { table.String(c, &k.Account, keyenc.Ascending) },
	Restore: func(k *TotalKey, r *testpb.Total) { r.Account = k.Account },
	Elided:  []protowire.Number{1},
})

var entryAccountsTable = table.NewSchema(table.Def[EntryAccountKey, *testpb.EntryAccount]{
	Name:    "EntryAccounts",
	Key:     []string{"entry"},
	KeyOf:   func(r *testpb.EntryAccount) EntryAccountKey { return EntryAccountKey{r.GetEntry()} },
	Fields:  func(k *EntryAccountKey, c *table.Codec) { table.String(c, &k.Entry, keyenc.Ascending) },
	Restore: func(k *EntryAccountKey, r *testpb.EntryAccount) { r.Entry = k.Entry },
	Elided:  []protowire.Number{1},
})

type handler interface {
	OnDeposit(tx *txn, msg *testpb.Deposit) error
	FinalizeTxn(tx *txn) error
}

type txn struct {
	runtime.Txn
	Entries       table.Table[EntryKey, *testpb.Entry]
	Totals        table.Table[TotalKey, *testpb.Total]
	EntryAccounts table.Table[EntryAccountKey, *testpb.EntryAccount]
}

var testConsumer = &runtime.Consumer[handler, *txn]{
	Name:          "gazconsumer.querytest.v1.Bank",
	ShardDefaults: pc.ShardSpec{},
	Inputs: []runtime.Input[handler, *txn]{
		runtime.Handle(depositType, labels.ContentType_ProtoFixed, "OnDeposit", handler.OnDeposit),
	},
	NewTxn: func(kv runtime.KV) *txn {
		return &txn{Entries: entriesTable.Open(kv), Totals: totalsTable.Open(kv), EntryAccounts: entryAccountsTable.Open(kv)}
	},
	FinalizeTxn: handler.FinalizeTxn,
}

// testQueries is service TestQueries, as generated.
var testQueries = &query.Service{
	Name:       "gazconsumer.querytest.v1.TestQueries",
	Consumer:   testConsumer.Name,
	File:       "test.proto",
	Partitions: labels.MessageType + "=" + depositType,
	Methods: []*query.Method{
		query.Get(query.GetDef[*testpb.GetTotalRequest, *testpb.Total, TotalKey, *testpb.Total]{
			Name:  "GetTotal",
			Table: totalsTable,
			Partition: func(r *testpb.GetTotalRequest, b []byte) []byte {
				return keyenc.AppendString(b, r.GetAccount(), keyenc.Ascending)
			},
			Key:      func(r *testpb.GetTotalRequest) (TotalKey, error) { return TotalKey{r.GetAccount()}, nil },
			Response: func(row *testpb.Total) *testpb.Total { return row },
		}),
		query.Scan(query.ScanDef[*testpb.ListEntriesRequest, *testpb.ListEntriesResponse, EntryKey, *testpb.Entry]{
			Name:  "ListEntries",
			Table: entriesTable,
			Partition: func(r *testpb.ListEntriesRequest, b []byte) []byte {
				return keyenc.AppendString(b, r.GetAccount(), keyenc.Ascending)
			},
			Prefix: func(r *testpb.ListEntriesRequest) (EntryKey, int, error) {
				return EntryKey{Account: r.GetAccount()}, 1, nil
			},
			Limit:          func(r *testpb.ListEntriesRequest) int64 { return int64(r.GetLimit()) },
			LimitField:     "limit",
			PageToken:      func(r *testpb.ListEntriesRequest) ([]byte, error) { return query.ParseToken(r.GetPageToken()) },
			PageTokenField: "page_token",
			DefaultLimit:   100,
			MaxLimit:       1000,
			Response: func(rows []*testpb.Entry, next []byte) *testpb.ListEntriesResponse {
				return &testpb.ListEntriesResponse{Entries: rows, NextPageToken: query.FormatToken(next)}
			},
			Rows: func(r *testpb.ListEntriesResponse) []*testpb.Entry { return r.GetEntries() },
			Next: func(r *testpb.ListEntriesResponse) ([]byte, error) { return query.ParseToken(r.GetNextPageToken()) },
		}),
		query.Scan(query.ScanDef[*testpb.ListTotalsRequest, *testpb.ListTotalsResponse, TotalKey, *testpb.Total]{
			Name:           "ListTotals",
			Table:          totalsTable,
			Prefix:         func(*testpb.ListTotalsRequest) (TotalKey, int, error) { return TotalKey{}, 0, nil },
			Limit:          func(r *testpb.ListTotalsRequest) int64 { return int64(r.GetLimit()) },
			LimitField:     "limit",
			PageToken:      func(r *testpb.ListTotalsRequest) ([]byte, error) { return query.ParseToken(r.GetPageToken()) },
			PageTokenField: "page_token",
			DefaultLimit:   100,
			MaxLimit:       1000,
			Response: func(rows []*testpb.Total, next []byte) *testpb.ListTotalsResponse {
				return &testpb.ListTotalsResponse{Totals: rows, NextPageToken: query.FormatToken(next)}
			},
			Rows: func(r *testpb.ListTotalsResponse) []*testpb.Total { return r.GetTotals() },
			Next: func(r *testpb.ListTotalsResponse) ([]byte, error) { return query.ParseToken(r.GetNextPageToken()) },
		}),
		query.Get(query.GetDef[*testpb.FindEntryRequest, *testpb.EntryAccount, EntryAccountKey, *testpb.EntryAccount]{
			Name:  "FindEntry",
			Table: entryAccountsTable,
			Key: func(r *testpb.FindEntryRequest) (EntryAccountKey, error) {
				if r.GetEntry() == "" {
					return EntryAccountKey{}, query.FieldError("entry", "must not be empty")
				}
				return EntryAccountKey{r.GetEntry()}, nil
			},
			Response: func(row *testpb.EntryAccount) *testpb.EntryAccount { return row },
		}),
	},
}

// bank is the test consumer's handler. A deposit with Hold set holds its
// transaction open, once its writes are made, until release is closed.
type bank struct {
	mu      sync.Mutex
	held    chan struct{} // Closed once a held deposit is consumed.
	release chan struct{}
}

func newBank() *bank { return &bank{held: make(chan struct{}), release: make(chan struct{})} }

func (b *bank) OnDeposit(tx *txn, msg *testpb.Deposit) error {
	if msg.GetEntry() == poisonEntry {
		return fmt.Errorf("deposit %s is poisoned", msg.GetEntry())
	}
	if err := tx.Entries.Put(&testpb.Entry{Account: msg.GetAccount(), Entry: msg.GetEntry(), Cents: msg.GetCents()}); err != nil {
		return err
	}
	if err := tx.EntryAccounts.Put(&testpb.EntryAccount{Entry: msg.GetEntry(), Account: msg.GetAccount()}); err != nil {
		return err
	}
	var total, _, err = tx.Totals.Get(TotalKey{msg.GetAccount()})
	if err != nil {
		return err
	} else if total == nil {
		total = &testpb.Total{Account: msg.GetAccount()}
	}
	total.Cents += msg.GetCents()
	total.Deposits++
	if err = tx.Totals.Put(total); err != nil {
		return err
	}
	if msg.GetHold() {
		b.mu.Lock()
		select {
		case <-b.held:
		default:
			close(b.held)
		}
		b.mu.Unlock()
		select {
		case <-b.release:
		case <-tx.Shard.Context().Done():
			return tx.Shard.Context().Err()
		}
	}
	return nil
}

func (b *bank) FinalizeTxn(*txn) error { return nil }

// newTestApp returns the test consumer's application over the stores of
// stores.
func newTestApp(b *bank, partitions runtime.PartitionLister, stores runtime.StoreOpener) (runtime.Application, error) {
	return runtime.NewAdapter(testConsumer, handler(b), stores, partitions)
}

// journalsYAML are the journals of the test consumer's n shards under
// prefix: deposits partitions and recovery logs.
func journalsYAML(prefix string, n int) string {
	var b strings.Builder
	fmt.Fprintf(&b, `name: %s/
replication: 1
fragment:
  length: 1048576
  stores: [file:///]
  refresh_interval: 1s
  compression_codec: NONE
children:
  - name: %s/deposits/
    labels:
      - name: %s
        value: %s
      - name: content-type
        value: %s
    children:
`, prefix, prefix, labels.MessageType, depositType, labels.ContentType_ProtoFixed)
	for i := range n {
		fmt.Fprintf(&b, "      - name: %s/deposits/part-%02d\n", prefix, i)
	}
	fmt.Fprintf(&b, `  - name: %s/recovery/
    labels:
      - name: content-type
        value: %s
    children:
`, prefix, labels.ContentType_RecoveryLog)
	for i := range n {
		fmt.Fprintf(&b, "      - name: %s/recovery/q-%02d\n", prefix, i)
	}
	return b.String()
}

// shardSpecs returns the specs of the test consumer's n shards: shard
// q-NN reads deposits part-NN, with a hot standby.
func shardSpecs(prefix string, n int) []*pc.ShardSpec {
	var out []*pc.ShardSpec
	for i := range n {
		out = append(out, &pc.ShardSpec{
			Id:                pc.ShardID(fmt.Sprintf("q-%02d", i)),
			Sources:           []pc.ShardSpec_Source{{Journal: pb.Journal(fmt.Sprintf("%s/deposits/part-%02d", prefix, i))}},
			RecoveryLogPrefix: prefix + "/recovery",
			HintPrefix:        "/gazette/hints/" + prefix,
			HintBackups:       1,
			MinTxnDuration:    0,
			MaxTxnDuration:    50e6, // 50ms.
			HotStandbys:       1,
		})
	}
	return out
}
