package deploy_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gazconsumer/gazconsumer/devstack/devstacktest"
	"github.com/gazconsumer/gazconsumer/internal/progress"
	"github.com/gazconsumer/gazconsumer/runtime/membertest"
	"github.com/gazconsumer/gazconsumer/runtime/membertest/sums"
	"gopkg.in/yaml.v2"
)

// monitoring is the directory of the dashboard and the alerting rules,
// relative to deploy/.
const monitoring = "monitoring"

// TestAlertRules checks the alerting rules and runs their unit tests with
// promtool, which scripts/setup.sh installs (Debian's prometheus package):
// the test fails without it.
func TestAlertRules(t *testing.T) {
	var promtool, err = exec.LookPath("promtool")
	if err != nil {
		t.Fatalf("promtool is needed to check deploy/monitoring/alerts.yaml (make setup installs it, from Debian's prometheus package): %v", err)
	}
	for _, args := range [][]string{{"check", "rules", "alerts.yaml"}, {"test", "rules", "alerts_test.yaml"}} {
		var cmd = exec.Command(promtool, args...)
		cmd.Dir = monitoring
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// TestDashboard checks that the dashboard is JSON that Grafana imports:
// panels with queries of the dashboard's Prometheus data source.
func TestDashboard(t *testing.T) {
	var d = readDashboard(t)
	if d.UID == "" || d.Title == "" {
		t.Errorf("the dashboard has no uid or title")
	}
	var queries int
	for _, p := range d.Panels {
		if p.Type == "row" {
			continue
		}
		if p.Datasource.UID != "${datasource}" {
			t.Errorf("panel %q: data source %q, want the dashboard's variable ${datasource}", p.Title, p.Datasource.UID)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			if strings.TrimSpace(tg.Expr) == "" {
				t.Errorf("panel %q: query %s is empty", p.Title, tg.RefID)
			}
			queries++
		}
	}
	if queries == 0 {
		t.Fatal("the dashboard has no queries")
	}
}

// duringRescales are the metrics members export only while a shard is in
// a phase of a rescale, which the consumer of TestMonitoringUsesRegisteredMetrics
// (not rescalable) never is: runtime/shardmetrics' TestRescaleGauges
// checks their names, and example's TestRescaleUnderLoad reads them from
// members rescaling.
var duringRescales = map[string]bool{progress.RescalePhase: true, progress.RescaleDropped: true, progress.RescaleThrough: true}

// TestMonitoringUsesRegisteredMetrics checks that every metric the
// dashboard and the alerting rules query is one that members export: it
// runs two members of a consumer (a primary and its standby) on an
// in-process stack, feeds them, and scrapes their /metrics until every
// name is there.
func TestMonitoringUsesRegisteredMetrics(t *testing.T) {
	var used = usedMetrics(t)
	if len(used) < 10 {
		t.Fatalf("found only %d metric names in the dashboard and rules: %v", len(used), used)
	}

	var ctx, cancel = context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var stack = devstacktest.StartT(t, "")
	var c, err = sums.New(ctx, stack.Stack, "monitoring", 1, t.TempDir(), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	var members []*membertest.Member
	for _, id := range []string{"member-a", "member-b"} {
		var m, err = c.Start(id)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = m.Kill() })
		members = append(members, m)
	}
	if err = c.ApplyShards(ctx, members[0], nil); err != nil {
		t.Fatal(err)
	}
	if err = c.NewFeed(ctx).Publish(200); err != nil {
		t.Fatal(err)
	}
	if err = c.WaitCaughtUp(ctx); err != nil {
		t.Fatal(err)
	}

	// Gauges of the standby's recovery appear as it follows the log.
	var deadline = time.After(30 * time.Second)
	var missing []string
	for {
		var exported = map[string]bool{"up": true} // Prometheus' own, of each target.
		for _, m := range members {
			for name := range scrapeNames(t, m.Svc.Endpoint().URL().String()+"/metrics") {
				exported[name] = true
			}
		}
		missing = missing[:0]
		for _, name := range used {
			if !exported[name] && !duringRescales[name] {
				missing = append(missing, name)
			}
		}
		if len(missing) == 0 {
			return
		}
		select {
		case <-deadline:
			t.Fatalf("the dashboard or the alerting rules query metrics that members do not export: %v", missing)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// dashboard is what the tests read of dashboard.json.
type dashboard struct {
	UID, Title string
	Panels     []struct {
		Type, Title string
		Datasource  struct{ UID string }
		Targets     []struct {
			RefID string `json:"refId"`
			Expr  string
		}
	}
	Templating struct {
		List []struct {
			Name  string
			Query any
		}
	}
}

func readDashboard(t *testing.T) dashboard {
	t.Helper()
	var b, err = os.ReadFile(filepath.Join(monitoring, "dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err = json.Unmarshal(b, &d); err != nil {
		t.Fatalf("dashboard.json: %v", err)
	}
	return d
}

// metricName matches, in a PromQL expression, the names of the metrics of
// members: gazconsumer's, Gazette's, gRPC's, Go's and the process's.
var metricName = regexp.MustCompile(`\b(?:gazconsumer|gazette|grpc|go|process)_[a-zA-Z0-9_]+\b|\bup\b`)

// labelNames are the label names that metricName also matches.
var labelNames = []string{"grpc_code", "grpc_method", "grpc_service", "grpc_type"}

// usedMetrics returns the names of the metrics that the dashboard's queries
// and variables and the alerting rules' expressions name, sorted.
func usedMetrics(t *testing.T) []string {
	t.Helper()
	var exprs []string
	var d = readDashboard(t)
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			exprs = append(exprs, tg.Expr)
		}
	}
	for _, v := range d.Templating.List {
		if q, ok := v.Query.(map[string]any); ok {
			exprs = append(exprs, fmt.Sprint(q["query"]))
		}
	}
	var b, err = os.ReadFile(filepath.Join(monitoring, "alerts.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var rules struct {
		Groups []struct {
			Rules []struct{ Alert, Record, Expr string }
		}
	}
	if err = yaml.Unmarshal(b, &rules); err != nil {
		t.Fatalf("alerts.yaml: %v", err)
	}
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			exprs = append(exprs, r.Expr)
		}
	}
	var names []string
	for _, e := range exprs {
		for _, name := range metricName.FindAllString(e, -1) {
			if !slices.Contains(labelNames, name) && !slices.Contains(names, name) {
				names = append(names, name)
			}
		}
	}
	slices.Sort(names)
	return names
}

// scrapeNames returns the names of the series that url exports, in
// Prometheus' text format: a histogram's _bucket, _sum and _count, and a
// summary's _sum and _count, with its name.
func scrapeNames(t *testing.T, url string) map[string]bool {
	t.Helper()
	var resp, err = http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	var names = make(map[string]bool)
	var sc = bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var f = strings.Fields(sc.Text())
		if len(f) != 4 || f[0] != "#" || f[1] != "TYPE" {
			continue
		}
		names[f[2]] = true
		switch f[3] {
		case "histogram":
			names[f[2]+"_bucket"], names[f[2]+"_sum"], names[f[2]+"_count"] = true, true, true
		case "summary":
			names[f[2]+"_sum"], names[f[2]+"_count"] = true, true
		}
	}
	if err = sc.Err(); err != nil {
		t.Fatal(err)
	}
	return names
}
