package example_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"go.gazette.dev/core/auth"
	pc "go.gazette.dev/core/consumer/protocol"
	"go.gazette.dev/core/consumer/shardspace"
	"go.gazette.dev/core/server"
	"gopkg.in/yaml.v2"

	"github.com/gazconsumer/gazconsumer/console"
	"github.com/gazconsumer/gazconsumer/devstack"
	"github.com/gazconsumer/gazconsumer/devstack/devstacktest"
	bankv1 "github.com/gazconsumer/gazconsumer/example/gen/bank/v1"
	"github.com/gazconsumer/gazconsumer/example/internal/leaderboard"
	"github.com/gazconsumer/gazconsumer/example/internal/ledger"
	"github.com/gazconsumer/gazconsumer/example/internal/load"
	"github.com/gazconsumer/gazconsumer/internal/clientflags"
	"github.com/gazconsumer/gazconsumer/runtime"
	"github.com/gazconsumer/gazconsumer/runtime/membertest"
	"github.com/gazconsumer/gazconsumer/runtime/partition"
	"github.com/gazconsumer/gazconsumer/runtime/query"
	"github.com/gazconsumer/gazconsumer/specs"
	"github.com/gazconsumer/gazconsumer/store/rocks"
)

// TestConsoleInBrowser runs the example bank on a secured stack (mutual
// TLS, authorization keys) under a paced load, serves the web console of
// it, and drives the console in headless Chromium: the consumers page lists
// every shard PRIMARY with a throughput; a shard's page shows its lag fall to
// zero once the load stops; the state browser, through its form, shows a
// balance equal to the one the ledger's GetBalance answers. It saves a
// screenshot of each page to docs/console-*.png.
func TestConsoleInBrowser(t *testing.T) {
	var chromium, err = exec.LookPath("chromium")
	if err != nil {
		t.Fatalf("chromium is not installed (make setup installs it, Debian package chromium): %v", err)
	}
	var ctx, cancel = context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// A secured stack, as gazconsumer dev --tls --auth-keys generate runs.
	var raw = make([]byte, 32)
	_, _ = rand.Read(raw)
	var keys = base64.StdEncoding.EncodeToString(raw)
	var opts = devstacktest.Options(t.TempDir())
	opts.TLS, opts.AuthKeys = true, keys
	stack, err := devstack.Start(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := stack.Close(); err != nil {
			t.Errorf("closing the stack: %v", err)
		}
	}()
	if _, err = specs.ApplyJournalsFile(ctx, stack.Journals(), "specs/journals.yaml"); err != nil {
		t.Fatal(err)
	}
	var files, _ = stack.TLS()
	var flags = clientflags.MemberFlags{CertFile: files.CertFile, CertKeyFile: files.KeyFile, TrustedCAFile: files.CAFile, AuthKeys: keys}
	sec, err := flags.Security()
	if err != nil {
		t.Fatal(err)
	}
	keyed, err := auth.NewKeyedAuth(keys)
	if err != nil {
		t.Fatal(err)
	}

	// The ledger and the leaderboard, a member each, in this process.
	var parts = partition.NewWatched(ctx, stack.Journals())
	ledgerApp, err := bankv1.NewLedgerApplication(ledger.NewLedgerHandler(), rocks.Opener{}, parts)
	if err != nil {
		t.Fatal(err)
	}
	boardApp, err := bankv1.NewLeaderboardApplication(leaderboard.NewLeaderboardHandler(), rocks.Opener{}, parts)
	if err != nil {
		t.Fatal(err)
	}
	var shards []pc.ShardID
	var ledgerMember *membertest.Member
	for _, app := range []struct {
		name string
		app  runtime.Application
	}{{"ledger", ledgerApp}, {"leaderboard", boardApp}} {
		var c = membertest.New(stack, "/gazette/consumers/"+app.name, app.app, t.TempDir())
		c.Verifier, c.Authorizer = keyed, keyed
		if c.ServerTLS, err = server.BuildTLSConfig(files.CertFile, files.KeyFile, files.CAFile); err != nil {
			t.Fatal(err)
		}
		if c.PeerTLS, err = server.BuildTLSConfig(files.CertFile, files.KeyFile, files.CAFile); err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		m, err := c.Start(app.name + "-a")
		if err != nil {
			t.Fatal(err)
		}
		if app.name == "ledger" {
			ledgerMember = m
		}
		defer func() {
			if err := m.Stop(); err != nil {
				t.Errorf("stopping %s: %v", app.name, err)
			}
		}()
		var specs = shardSpecs(t, "specs/"+app.name+"-shards.yaml")
		if err = c.Apply(ctx, m, specs...); err != nil {
			t.Fatal(err)
		}
		for _, s := range specs {
			if _, err = c.PrimaryOf(ctx, s.Id); err != nil {
				t.Fatal(err)
			}
			shards = append(shards, s.Id)
		}
	}

	// The console, as gazconsumer dev serves it.
	con, err := console.New(console.Config{Etcd: stack.Etcd(), Journals: stack.Journals(), Members: sec})
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var consoleCtx, stopConsole = context.WithCancel(ctx)
	var served = make(chan error, 1)
	go func() { served <- con.Serve(consoleCtx, l) }()
	defer func() {
		stopConsole()
		if err := <-served; err != nil {
			t.Error(err)
		}
		con.Close()
	}()
	var base = "http://" + l.Addr().String()

	// The load, as bankctl publish --rate publishes it.
	msgs, rec, err := load.Generate(load.Options{Orders: 3000, Payments: 3000, Customers: 40, Accounts: 3, Seed: 7, TxnSize: 25})
	if err != nil {
		t.Fatal(err)
	}

	// The browser.
	var allocCtx, stopAlloc = chromedp.NewExecAllocator(ctx, append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium), chromedp.NoSandbox, chromedp.WindowSize(1400, 1000), chromedp.Flag("disable-dev-shm-usage", true))...)
	defer stopAlloc()
	var browser, stopBrowser = chromedp.NewContext(allocCtx)
	defer func() {
		stopBrowser()
		_ = chromedp.Cancel(browser)
	}()
	var do = func(what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(browser, actions...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	// waitFor evaluates expr, a JavaScript expression of a boolean, until it
	// is true; an evaluation failing (a page loading) is tried again.
	var waitFor = func(what, expr string, timeout time.Duration) {
		t.Helper()
		var deadline = time.Now().Add(timeout)
		for {
			var ok, err = chromedp.Run(browser, chromedp.Evaluate[bool](expr))
			if err == nil && ok {
				return
			}
			if time.Now().After(deadline) {
				var html, _ = chromedp.Run(browser, chromedp.Evaluate[string](`document.querySelector("main") ? document.querySelector("main").innerText : document.body.innerText`))
				t.Fatalf("%s: not within %s (last error %v); the page shows:\n%s", what, timeout, err, html)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	var screenshot = func(name string) {
		t.Helper()
		var png, err = chromedp.Run(browser, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatalf("screenshot %s: %v", name, err)
		}
		var path, _ = filepath.Abs(filepath.Join("..", "docs", "console-"+name+".png"))
		if err = os.WriteFile(path, png, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("screenshot of the %s page: %s", name, path)
	}

	// Consumers: every shard PRIMARY, each consuming, while the load runs.
	// The load starts once the page is open: it lasts 10s, and the
	// browser's start may take longer than that on a busy machine.
	do("opening the consumers page", chromedp.Navigate(base+"/"))
	var published = make(chan error, 1)
	go func() { published <- load.PublishAt(ctx, stack.Journals(), msgs, 25, 600, nil) }()
	waitFor("every shard PRIMARY with a throughput", fmt.Sprintf(`(() => {
		const rows = [...document.querySelectorAll("tr.shard")];
		return rows.length === %d && rows.every(r => r.dataset.status === "PRIMARY" && parseFloat(r.dataset.rate) > 0);
	})()`, len(shards)), 30*time.Second)
	waitFor("the charts drawn", `document.querySelectorAll(".chart svg path").length >= 4`, 10*time.Second)
	screenshot("consumers")
	select {
	case err = <-published:
		if err != nil {
			t.Fatalf("publishing the load: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("the load was not published in time")
	}

	// A shard: its lag falls to zero once the load has stopped.
	do("opening a shard's page", chromedp.Navigate(base+"/shard?group=ledger&id=ledger-00"))
	waitFor("the shard's sources read through their write heads", `(() => {
		const lag = document.getElementById("shard-lag");
		const srcs = [...document.querySelectorAll("tr.source")];
		return lag !== null && lag.dataset.lag === "0" && srcs.length === 2 && srcs.every(s => s.dataset.lag === "0");
	})()`, 30*time.Second)
	waitFor("the shard's charts drawn", `document.querySelectorAll(".chart svg path").length >= 2`, 10*time.Second)
	screenshot("shard")

	// Journals: the families of the bank, with their partitions.
	do("opening the journals page", chromedp.Navigate(base+"/journals"))
	waitFor("the bank's journals listed", `document.querySelectorAll("tr.journal[data-journal^='bank/orders/part-']").length === 2`, 10*time.Second)
	screenshot("journals")

	// State: the form of GetBalance shows the balance the ledger answers.
	// The ledger releases the holds of unpaid orders only after its hold
	// window (ledger.DefaultHoldWindow, past the test's end): the balance
	// is the record's less those refunds.
	var want = rec.Balances[len(rec.Balances)/2]
	for _, u := range rec.Unpaid {
		if u.Customer == want.Customer && u.Account == want.Account {
			want.Cents -= u.Cents
		}
	}
	conn, err := query.Dialer(sec.TLS)(ledgerMember.Svc.Endpoint())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	answer, err := bankv1.NewLedgerQueriesClient(query.NewClient(conn, keyed)).GetBalance(ctx,
		&bankv1.GetBalanceRequest{CustomerId: want.Customer, AccountId: want.Account})
	if err != nil {
		t.Fatalf("GetBalance(%s, %s): %v", want.Customer, want.Account, err)
	}
	var answered = answer.BalanceCents
	do("opening the state browser", chromedp.Navigate(base+"/state?group=ledger&method=gazconsumer.example.bank.v1.LedgerQueries/GetBalance"))
	waitFor("the form of GetBalance", `document.querySelector("input[name=customerId]") !== null && document.querySelector("input[name=accountId]") !== null`, 10*time.Second)
	do("querying a balance",
		chromedp.SetValue(chromedp.CSS("input[name=customerId]"), want.Customer),
		chromedp.SetValue(chromedp.CSS("input[name=accountId]"), want.Account),
		chromedp.Click(chromedp.CSS("#run")))
	waitFor("the balance's row", `document.querySelector("#rows tbody tr td") !== null`, 15*time.Second)
	shown, err := chromedp.Run(browser, chromedp.Evaluate[map[string]string](`(() => {
		const heads = [...document.querySelectorAll("#rows thead th")].map(th => th.textContent);
		const cells = [...document.querySelectorAll("#rows tbody tr:first-child td")].map(td => td.textContent);
		return Object.fromEntries(heads.map((h, i) => [h, cells[i]]));
	})()`))
	if err != nil {
		t.Fatal(err)
	}
	screenshot("state")
	if shown["customer_id"] != want.Customer || shown["account_id"] != want.Account || shown["balance_cents"] != strconv.FormatInt(answered, 10) {
		t.Fatalf("the state browser shows %v; GetBalance answers %d cents for %s/%s", shown, answered, want.Customer, want.Account)
	}

	// A SCAN of the customer's balances, a page of one row at a time.
	do("scanning the customer's balances", chromedp.Navigate(base+"/state?"+url.Values{"group": {"ledger"}, "method": {"gazconsumer.example.bank.v1.LedgerQueries/ListBalances"},
		"run": {"1"}, "customerId": {want.Customer}, "limit": {"1"}}.Encode()))
	waitFor("the first page and a link to the next", `document.querySelectorAll("#rows tbody tr").length === 1 && document.getElementById("next") !== null`, 15*time.Second)
	do("following the link to the next page", chromedp.Click(chromedp.CSS("#next")))
	waitFor("the second page", `document.getElementById("page") !== null && document.getElementById("page").textContent.startsWith("Page 2: 1 rows")`, 15*time.Second)

	if answered != want.Cents {
		t.Fatalf("GetBalance answers %d cents for %s/%s; the load's record, %d", answered, want.Customer, want.Account, want.Cents)
	}
}

// shardSpecs reads the shard specs of a file of gazctl shards apply's
// format.
func shardSpecs(t *testing.T, path string) []*pc.ShardSpec {
	t.Helper()
	var b, err = os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var set shardspace.Set
	if err = yaml.UnmarshalStrict(b, &set); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	set.PushDown()
	var out []*pc.ShardSpec
	for _, s := range set.Shards {
		out = append(out, &s.Spec)
	}
	return out
}
