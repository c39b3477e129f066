package console

import (
	"bytes"
	"cmp"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	pb "go.gazette.dev/core/broker/protocol"

	"github.com/gazconsumer/gazconsumer/internal/brokerconn"
	"github.com/gazconsumer/gazconsumer/internal/progress"
)

// Config configures a Console.
type Config struct {
	// Etcd is a client of the etcd holding the consumer groups.
	Etcd *clientv3.Client
	// Journals is a client of the brokers.
	Journals pb.RoutedJournalClient
	// Members is how the console calls members: their TLS (a client
	// certificate, and the CA of theirs) and the authorization of its calls
	// (keys signing READ and LIST tokens), as gazctl's --consumer.* flags
	// give them.
	Members brokerconn.Security
	// Root is the etcd prefix under which consumer groups are found (each
	// prefix having shard specs or members under it is one);
	// "/gazette/consumers/" if empty.
	Root string
	// Group, if set, is the etcd prefix of the only group shown.
	Group string
	// Interval between the readings of the charts; 1s if zero.
	Interval time.Duration
	// History is the number of readings the charts show; 120 if zero.
	History int
	// Timeout bounds a reading; 5s if zero.
	Timeout time.Duration
}

// Console is the web console: an http.Handler of its pages, and the
// sampler behind its charts, which Run runs.
type Console struct {
	g       *gatherer
	s       *sampler
	members *progress.Members
	refl    reflector
	pages   map[string]*template.Template
	mux     *http.ServeMux
}

//go:embed templates/*.html
var templateFiles embed.FS

//go:embed static
var staticFiles embed.FS

// New returns a Console of cfg. Close it when done.
func New(cfg Config) (*Console, error) {
	if cfg.Etcd == nil || cfg.Journals == nil {
		return nil, errors.New("console: Config.Etcd and Config.Journals are required")
	}
	var members = progress.NewMembers(cfg.Members)
	var g = &gatherer{
		etcd: cfg.Etcd, journals: cfg.Journals, members: members,
		root: cmp.Or(cfg.Root, "/gazette/consumers/"), group: cfg.Group, timeout: cmp.Or(cfg.Timeout, 5*time.Second),
	}
	var c = &Console{
		g:       g,
		s:       &sampler{g: g, interval: cmp.Or(cfg.Interval, time.Second), keep: cmp.Or(cfg.History, 120), idleAfter: time.Minute},
		members: members,
		refl:    reflector{cache: make(map[pb.Endpoint]reflected)},
		pages:   make(map[string]*template.Template),
		mux:     http.NewServeMux(),
	}
	for _, name := range []string{"consumers", "shard", "journals", "journal", "state"} {
		var t, err = template.New(name).Funcs(funcs).ParseFS(templateFiles, "templates/layout.html", "templates/"+name+".html")
		if err != nil {
			return nil, fmt.Errorf("console: parsing the templates of page %s: %w", name, err)
		}
		c.pages[name] = t
	}
	static, err := fs.Sub(staticFiles, "static")
	if err != nil {
		return nil, fmt.Errorf("console: %w", err)
	}
	c.mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	c.mux.HandleFunc("GET /{$}", c.serveConsumers)
	c.mux.HandleFunc("GET /shard", c.serveShard)
	c.mux.HandleFunc("GET /journals", c.serveJournals)
	c.mux.HandleFunc("GET /journal", c.serveJournal)
	c.mux.HandleFunc("GET /state", c.serveState)
	c.mux.HandleFunc("GET /api/series", c.serveSeries)
	c.mux.HandleFunc("GET /api/reading", c.serveReading)
	return c, nil
}

// Run samples the groups for the charts until ctx is done, while the
// console is watched (a page was asked for within the last minute).
func (c *Console) Run(ctx context.Context) { c.s.run(ctx) }

// Close closes the console's connections to members.
func (c *Console) Close() { c.members.Close() }

// ServeHTTP serves the console's pages. A panic of a page is shown, as an
// error, rather than a connection closed.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	defer func() {
		if v := recover(); v != nil {
			slog.Error("console: a page panicked", "path", r.URL.Path, "panic", v)
			http.Error(w, fmt.Sprintf("the console failed to render %s: %v", r.URL.Path, v), http.StatusInternalServerError)
		}
	}()
	c.mux.ServeHTTP(w, r)
}

// Serve serves the console on l, and samples for its charts, until ctx is
// done.
func (c *Console) Serve(ctx context.Context, l net.Listener) error {
	var srv = &http.Server{Handler: c, ReadHeaderTimeout: 10 * time.Second}
	var runCtx, cancel = context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { c.Run(runCtx) })
	wg.Go(func() {
		<-runCtx.Done()
		var shutCtx, stop = context.WithTimeout(context.Background(), 5*time.Second)
		defer stop()
		_ = srv.Shutdown(shutCtx)
	})
	var err = srv.Serve(l)
	cancel()
	wg.Wait()
	if err != nil && err != http.ErrServerClosed {
		return fmt.Errorf("console: serving on %s: %w", l.Addr(), err)
	}
	return nil
}

// view is what a page's template renders.
type view struct {
	Title string
	// Nav is the navigation entry of the page.
	Nav string
	// Errors are shown above the page's content.
	Errors  []string
	Reading *Reading
	Group   *Group
	Shard   *Shard
	// Families and Journal are of the journals pages; Selector their
	// label selector.
	Families []*Family
	Journal  *Journal
	Selector string
	State    *stateView
	// Live is the URL of the page's live part, which its script reloads.
	Live string
}

// render writes page name of v: whole, or only its live part if the
// request asks for ?fragment=1. The page is rendered before anything is
// written, so that a failure of its template is shown as an error.
func (c *Console) render(w http.ResponseWriter, r *http.Request, name string, v *view) {
	var tmpl = "layout"
	if r.URL.Query().Get("fragment") == "1" {
		tmpl = "live"
	}
	var buf bytes.Buffer
	if err := c.pages[name].ExecuteTemplate(&buf, tmpl, v); err != nil {
		slog.Error("console: rendering a page", "page", name, "err", err)
		http.Error(w, fmt.Sprintf("the console failed to render page %s: %v", name, err), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(buf.Bytes())
}

func (c *Console) serveConsumers(w http.ResponseWriter, r *http.Request) {
	var rd = c.s.latest(r.Context())
	c.render(w, r, "consumers", &view{Title: "Consumers", Nav: "consumers", Errors: rd.Errors, Reading: rd, Live: "/?fragment=1"})
}

func (c *Console) serveShard(w http.ResponseWriter, r *http.Request) {
	var group, id = r.URL.Query().Get("group"), r.URL.Query().Get("id")
	var rd = c.s.latest(r.Context())
	var v = &view{Title: "Shard " + id, Nav: "consumers", Errors: rd.Errors, Reading: rd,
		Live: "/shard?" + url.Values{"group": {group}, "id": {id}, "fragment": {"1"}}.Encode()}
	if v.Group = rd.Group(group); v.Group == nil {
		v.Errors = append(v.Errors, fmt.Sprintf("no consumer group %q (under %s) in etcd", group, c.g.root))
	} else if v.Shard = v.Group.Shard(id); v.Shard == nil {
		v.Errors = append(v.Errors, fmt.Sprintf("consumer group %s has no shard %q", group, id))
	}
	if v.Group == nil || v.Shard == nil {
		w.WriteHeader(http.StatusNotFound)
	}
	c.render(w, r, "shard", v)
}

func (c *Console) serveJournals(w http.ResponseWriter, r *http.Request) {
	var v = &view{Title: "Journals", Nav: "journals", Selector: r.URL.Query().Get("l")}
	var sel, err = pb.ParseLabelSelector(v.Selector)
	if err != nil {
		v.Errors = append(v.Errors, fmt.Sprintf("label selector %q: %v", v.Selector, err))
	} else if v.Families, err = c.g.readJournals(r.Context(), sel); err != nil {
		v.Errors = append(v.Errors, err.Error())
	}
	c.render(w, r, "journals", v)
}

func (c *Console) serveJournal(w http.ResponseWriter, r *http.Request) {
	var name = r.URL.Query().Get("name")
	var v = &view{Title: "Journal " + name, Nav: "journals"}
	var fams, err = c.g.readJournals(r.Context(), pb.LabelSelector{Include: pb.MustLabelSet("name", name)})
	if err != nil {
		v.Errors = append(v.Errors, err.Error())
	} else if len(fams) == 0 {
		v.Errors = append(v.Errors, fmt.Sprintf("the brokers list no journal %q", name))
		w.WriteHeader(http.StatusNotFound)
	} else {
		v.Journal = fams[0].Journals[0]
	}
	c.render(w, r, "journal", v)
}

// Series are the readings of a group's shards over time, for the charts.
type Series struct {
	// T are the times of the readings, in Unix milliseconds.
	T []int64 `json:"t"`
	// Shards are the series of each shard, in ID order.
	Shards []ShardSeries `json:"shards"`
}

// ShardSeries are a shard's messages a second and lag, in bytes, at each
// reading of a Series; null where unknown.
type ShardSeries struct {
	ID   string     `json:"id"`
	Rate []*float64 `json:"rate"`
	Lag  []*float64 `json:"lag"`
}

func (c *Console) serveSeries(w http.ResponseWriter, r *http.Request) {
	var group, shard = r.URL.Query().Get("group"), r.URL.Query().Get("shard")
	var readings = c.s.readings()
	var s = Series{T: []int64{}, Shards: []ShardSeries{}}
	var index = make(map[string]int)
	var known = func(x float64) *float64 {
		if x < 0 || math.IsNaN(x) {
			return nil
		}
		return &x
	}
	for i, rd := range readings {
		s.T = append(s.T, rd.At.UnixMilli())
		var g = rd.Group(group)
		if g == nil {
			continue
		}
		for _, sh := range g.Shards {
			if shard != "" && sh.ID != shard {
				continue
			}
			var at, ok = index[sh.ID]
			if !ok {
				at = len(s.Shards)
				index[sh.ID] = at
				s.Shards = append(s.Shards, ShardSeries{ID: sh.ID, Rate: make([]*float64, len(readings)), Lag: make([]*float64, len(readings))})
			}
			s.Shards[at].Rate[i] = known(sh.MsgRate)
			s.Shards[at].Lag[i] = known(float64(sh.Lag))
		}
	}
	slices.SortFunc(s.Shards, func(a, b ShardSeries) int { return strings.Compare(a.ID, b.ID) })
	writeJSON(w, s)
}

func (c *Console) serveReading(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, c.s.latest(r.Context()))
}

func writeJSON(w http.ResponseWriter, v any) {
	var b, err = json.Marshal(v)
	if err != nil {
		http.Error(w, fmt.Sprintf("encoding the answer: %v", err), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(b)
}

// funcs are the templates' functions.
var funcs = template.FuncMap{
	"bytes": func(n int64) string {
		if n < 0 {
			return "—"
		}
		return humanBytes(float64(n))
	},
	"rate": func(x float64) string {
		if x < 0 {
			return "—"
		}
		return fmt.Sprintf("%.1f", x)
	},
	"num": func(x float64) string { return fmt.Sprintf("%.0f", x) },
	"offset": func(n int64) string {
		if n < 0 {
			return "—"
		}
		return fmt.Sprint(n)
	},
	"pct":      func(x float64) string { return fmt.Sprintf("%.0f%%", x) },
	"dur":      func(d time.Duration) string { return d.Round(time.Millisecond).String() },
	"time":     func(t time.Time) string { return t.Format(time.DateTime) },
	"lower":    strings.ToLower,
	"query":    func(kv ...string) string { return queryOf(kv...) },
	"fragTime": FragmentTime,
	"addBytes": func(a, b int64) int64 { return a + b },
	"int64":    func(x float64) int64 { return int64(x) },
	"sub":      func(a, b pb.Offset) int64 { return int64(a - b) },
	"seconds": func(s float64) string {
		return time.Duration(s * float64(time.Second)).Round(time.Millisecond).String()
	},
}

// queryOf encodes pairs of names and values as a query string.
func queryOf(kv ...string) string {
	var v = make(url.Values)
	for i := 0; i+1 < len(kv); i += 2 {
		v.Set(kv[i], kv[i+1])
	}
	return v.Encode()
}

func humanBytes(n float64) string {
	var units = []string{"B", "KiB", "MiB", "GiB", "TiB"}
	var i int
	for n >= 1024 && i < len(units)-1 {
		n /= 1024
		i++
	}
	if i == 0 {
		return fmt.Sprintf("%.0f B", n)
	}
	return fmt.Sprintf("%.1f %s", n, units[i])
}
