package deploy_test

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/gazconsumer/gazconsumer/store/rocks/membudget"
)

// goRuntimeEnv are the Go runtime's environment variables, which the
// container of a consumer may set.
var goRuntimeEnv = []string{"GOMEMLIMIT", "GOGC", "GOMAXPROCS", "GODEBUG"}

// rocksdbOverhead is what RocksDB takes beside its block cache, which
// GOMEMLIMIT must leave it (see checkMemory).
const rocksdbOverhead = 256 << 20

type resources struct {
	Requests map[string]string `yaml:"requests"`
	Limits   map[string]string `yaml:"limits"`
}

type affinityTerm struct {
	TopologyKey   string        `yaml:"topologyKey"`
	LabelSelector labelSelector `yaml:"labelSelector"`
}

type affinity struct {
	PodAntiAffinity *struct {
		Required  []affinityTerm `yaml:"requiredDuringSchedulingIgnoredDuringExecution"`
		Preferred []struct {
			Weight int          `yaml:"weight"`
			Term   affinityTerm `yaml:"podAffinityTerm"`
		} `yaml:"preferredDuringSchedulingIgnoredDuringExecution"`
	} `yaml:"podAntiAffinity"`
}

type disruptionBudget struct {
	doc  *document
	Spec struct {
		Selector       labelSelector `yaml:"selector"`
		MaxUnavailable any           `yaml:"maxUnavailable"`
		MinAvailable   any           `yaml:"minAvailable"`
	} `yaml:"spec"`
}

// isMember reports whether cr is the container of a consumer member: a
// consumer command in a StatefulSet.
func isMember(cr containerRef) bool { return isConsumer(cr) && cr.w.doc.Kind == "StatefulSet" }

func (c *checker) forWorkloads(check func(*workload)) {
	for _, w := range c.m.workloads {
		check(w)
	}
}

// member returns the first member container of the overlay.
func (c *checker) member() containerRef {
	for _, w := range c.m.workloads {
		for _, cr := range w.containers() {
			if isMember(cr) {
				return cr
			}
		}
	}
	c.t.Fatal("no member in the overlay")
	return containerRef{}
}

// checkMemory checks a member's memory: its RocksDB budget (the
// --rocksdb.* flags or their variables, as the member reads them) is
// valid; its container has a memory limit of at least twice the budget
// (the budget bounds RocksDB's caches and the row caches; the rest is
// RocksDB's memory outside its cache and the Go heap beside the row
// caches), and requests as much; GOMEMLIMIT is set, above the row caches
// and within the limit less the block cache and RocksDB's overhead.
func (c *checker) checkMemory(cr containerRef) {
	if !isMember(cr) {
		return
	}
	var h, r = c.helpOf(cr)
	var d = cr.w.doc
	var cfg membudget.Config
	var bytesSet = c.settingOf(cr, h, r, membudget.FlagBytes)
	var err error
	if cfg.Bytes, err = membudget.ParseSize(bytesSet.value); err != nil {
		c.fail(d, bytesSet.field, "the memory budget: %v", err)
		return
	}
	for _, p := range []struct {
		flag string
		v    *float64
	}{{membudget.FlagWriteBufferShare, &cfg.WriteBufferShare}, {membudget.FlagRowCacheShare, &cfg.RowCacheShare}} {
		var set = c.settingOf(cr, h, r, p.flag)
		if *p.v, err = strconv.ParseFloat(set.value, 64); err != nil {
			c.fail(d, set.field, "%q is not a number", set.value)
			return
		}
	}
	var shardsSet = c.settingOf(cr, h, r, membudget.FlagShards)
	if cfg.Shards, err = strconv.Atoi(shardsSet.value); err != nil {
		c.fail(d, shardsSet.field, "%q is not an integer", shardsSet.value)
		return
	}
	if err = cfg.Validate(); err != nil {
		c.fail(d, bytesSet.field, "the member's memory budget: %v", err)
		return
	}

	var field = cr.field + ".resources"
	var quantity = func(kind string, m map[string]string) (membudget.Size, bool) {
		var v, ok = m["memory"]
		if !ok {
			c.fail(d, field+"."+kind+".memory", "is not set: the member's memory budget (%s, %s) bounds its caches, not its memory; a limit consistent with it does", cfg.Bytes, bytesSet.field)
			return 0, false
		}
		var n, err = membudget.ParseSize(v)
		if err != nil {
			c.fail(d, field+"."+kind+".memory", "%q: the test reads quantities of bytes or Ki, Mi, Gi, Ti (%v)", v, err)
			return 0, false
		}
		return n, true
	}
	var limit, okLimit = quantity("limits", cr.c.Resources.Limits)
	var request, okRequest = quantity("requests", cr.c.Resources.Requests)
	if !okLimit || !okRequest {
		return
	}
	if request != limit {
		c.fail(d, field+".requests.memory", "is %s, not the limit %s: a member uses its budget whole in time, which the scheduler must reserve", request, limit)
	}
	if limit < 2*cfg.Bytes {
		c.fail(d, field+".limits.memory", "is %s, less than twice the memory budget %s (%s): beside it, RocksDB's memory outside its cache and the Go heap beside the row caches need as much again", limit, cfg.Bytes, bytesSet.field)
	}

	var i = slices.IndexFunc(cr.c.Env, func(e envVar) bool { return e.Name == "GOMEMLIMIT" })
	if i < 0 {
		c.fail(d, cr.field+".env", "GOMEMLIMIT is not set: Go's heap grows to twice what it holds between collections, with no regard for the limit %s", limit)
		return
	}
	var gomem, gerr = membudget.ParseSize(cr.c.Env[i].Value)
	var gfield = cr.field + ".env[GOMEMLIMIT]"
	switch {
	case gerr != nil:
		c.fail(d, gfield, "%v", gerr)
	case int64(gomem)+cfg.BlockCacheBytes()+rocksdbOverhead > int64(limit):
		c.fail(d, gfield, "is %s: with the block cache (%s) and %s of RocksDB's own, beyond the limit %s",
			gomem, membudget.Size(cfg.BlockCacheBytes()), membudget.Size(rocksdbOverhead), limit)
	case int64(gomem) < 2*cfg.RowCacheBytes():
		c.fail(d, gfield, "is %s, less than twice the row caches (%s), which the Go heap holds: Go would collect without end",
			gomem, membudget.Size(cfg.RowCacheBytes()))
	}
}

// checkMemoryCatchesMistakes checks that checkMemory refuses, in a member
// of the overlay, memory settings inconsistent with its budget.
func (c *checker) checkMemoryCatchesMistakes() {
	var member = c.member()
	var withEnv = func(name, value string) []envVar {
		var env = slices.Clone(member.c.Env)
		if i := slices.IndexFunc(env, func(e envVar) bool { return e.Name == name }); i >= 0 {
			env[i].Value = value
		} else {
			env = append(env, envVar{Name: name, Value: value})
		}
		return env
	}
	var without = func(name string) []envVar {
		return slices.DeleteFunc(slices.Clone(member.c.Env), func(e envVar) bool { return e.Name == name })
	}
	var res = func(request, limit string) resources {
		var r = resources{Requests: map[string]string{}, Limits: map[string]string{}}
		if request != "" {
			r.Requests["memory"] = request
		}
		if limit != "" {
			r.Limits["memory"] = limit
		}
		return r
	}
	for _, tc := range []struct {
		name string
		env  []envVar
		res  resources
		want string
	}{
		{"no limit", member.c.Env, res("2Gi", ""), "limits.memory: is not set"},
		{"a limit under twice the budget", member.c.Env, res("1536Mi", "1536Mi"), "less than twice the memory budget"},
		{"a budget over half the limit", withEnv(membudget.EnvBytes, "1280Mi"), member.c.Resources, "less than twice the memory budget 1280Mi"},
		{"a request under the limit", member.c.Env, res("1Gi", "2Gi"), "not the limit"},
		{"a decimal quantity", member.c.Env, res("2G", "2G"), "the test reads quantities"},
		{"a malformed budget", withEnv(membudget.EnvBytes, "1GB"), member.c.Resources, "not a size"},
		{"an invalid share", withEnv(membudget.EnvRowCacheShare, "0.8"), member.c.Resources, "below 0.9"},
		{"no GOMEMLIMIT", without("GOMEMLIMIT"), member.c.Resources, "GOMEMLIMIT is not set"},
		{"GOMEMLIMIT crowding RocksDB", withEnv("GOMEMLIMIT", "1536MiB"), member.c.Resources, "beyond the limit"},
		{"GOMEMLIMIT under the row caches", withEnv("GOMEMLIMIT", "256MiB"), member.c.Resources, "collect without end"},
	} {
		var mutated = *member.c
		mutated.Env, mutated.Resources = tc.env, tc.res
		var cr = member
		cr.c = &mutated
		var failures []string
		var rc = *c
		rc.record = &failures
		rc.checkMemory(cr)
		if !strings.Contains(strings.Join(failures, "\n"), tc.want) {
			c.t.Errorf("%s: checkMemory reported %q, not %q", tc.name, failures, tc.want)
		}
	}
}

// checkDisruptions checks a StatefulSet of members: one
// PodDisruptionBudget of its namespace selects its pods, and no others,
// letting one member at a time go (a drain must not wait forever, nor take
// several members' shards at once); and a preferred pod anti-affinity by
// hostname spreads its members, and only them, over nodes (preferred, so
// that a cluster of fewer nodes still runs them all).
func (c *checker) checkDisruptions(w *workload) {
	if w.doc.Kind != "StatefulSet" || !slices.ContainsFunc(w.containers(), isMember) {
		return
	}
	var d = w.doc
	var labels = w.Spec.Template.Metadata.Labels
	var replicas = 1
	if w.Spec.Replicas != nil {
		replicas = *w.Spec.Replicas
	}
	// others are the pod labels of the other workloads of the namespace.
	var others []map[string]string
	for _, o := range c.m.workloads {
		if o != w && o.doc.Metadata.Namespace == d.Metadata.Namespace {
			others = append(others, o.Spec.Template.Metadata.Labels)
		}
	}
	var selectsOthers = func(s *labelSelector) bool {
		return slices.ContainsFunc(others, s.matches)
	}

	var pdbs []*disruptionBudget
	for _, p := range c.m.pdbs {
		if p.doc.Metadata.Namespace == d.Metadata.Namespace && p.Spec.Selector.matches(labels) {
			pdbs = append(pdbs, p)
		}
	}
	switch {
	case len(pdbs) == 0:
		c.fail(d, "spec.template.metadata.labels", "no PodDisruptionBudget selects the members: a drain may evict them all at once")
	case len(pdbs) > 1:
		c.fail(d, "spec.template.metadata.labels", "%d PodDisruptionBudgets select the members (%s, %s): the eviction API refuses to evict pods of several", len(pdbs), pdbs[0].doc, pdbs[1].doc)
	default:
		var p = pdbs[0]
		var allowed, why = disruptionsAllowed(p, replicas)
		if why != "" {
			c.fail(p.doc, "spec", "%s", why)
		} else if allowed != 1 {
			c.fail(p.doc, "spec", "lets %d of the %d members go at once, not 1: a drain would wait forever (0), or take several members' shards at once", allowed, replicas)
		}
		if selectsOthers(&p.Spec.Selector) {
			c.fail(p.doc, "spec.selector", "selects pods of other workloads than %s", d)
		}
	}

	var field = "spec.template.spec.affinity.podAntiAffinity"
	var aff = w.pod().Affinity
	if aff == nil || aff.PodAntiAffinity == nil {
		c.fail(d, field, "is not set: the scheduler may put every member on one node, which takes them all when it fails")
		return
	}
	if len(aff.PodAntiAffinity.Required) != 0 {
		c.fail(d, field+".requiredDuringSchedulingIgnoredDuringExecution", "is set: members beyond the number of nodes would stay pending (prefer it instead)")
	}
	var spread bool
	for i, p := range aff.PodAntiAffinity.Preferred {
		var f = fmt.Sprintf("%s.preferredDuringSchedulingIgnoredDuringExecution[%d].podAffinityTerm", field, i)
		switch {
		case p.Term.TopologyKey != "kubernetes.io/hostname":
		case !p.Term.LabelSelector.matches(labels):
			c.fail(d, f+".labelSelector", "does not select the members' pods (%v)", labels)
		case selectsOthers(&p.Term.LabelSelector):
			c.fail(d, f+".labelSelector", "selects pods of other workloads too: members would be kept from their nodes")
		case p.Weight < 1:
			c.fail(d, f, "has weight %d", p.Weight)
		default:
			spread = true
		}
	}
	if !spread {
		c.fail(d, field+".preferredDuringSchedulingIgnoredDuringExecution", "has no term spreading the members by kubernetes.io/hostname")
	}
}

// disruptionsAllowed returns how many of replicas pods p lets go at once,
// or why the test can't tell.
func disruptionsAllowed(p *disruptionBudget, replicas int) (int, string) {
	var count = func(v any) (int, string) {
		switch v := v.(type) {
		case int:
			return v, ""
		case string:
			if pct, ok := strings.CutSuffix(v, "%"); ok {
				if n, err := strconv.Atoi(pct); err == nil {
					return (n*replicas + 99) / 100, "" // Kubernetes rounds up.
				}
			}
		}
		return 0, fmt.Sprintf("%v is neither a count nor a percentage", v)
	}
	switch {
	case p.Spec.MaxUnavailable != nil && p.Spec.MinAvailable != nil:
		return 0, "sets both maxUnavailable and minAvailable"
	case p.Spec.MaxUnavailable != nil:
		return count(p.Spec.MaxUnavailable)
	case p.Spec.MinAvailable != nil:
		var n, why = count(p.Spec.MinAvailable)
		return replicas - n, why
	}
	return 0, "sets neither maxUnavailable nor minAvailable"
}

// checkDisruptionsCatchMistakes checks that checkDisruptions refuses, for
// a member StatefulSet of the overlay, budgets and affinities that would
// not work.
func (c *checker) checkDisruptionsCatchMistakes() {
	var w = c.member().w
	var own = *w.pod().Affinity.PodAntiAffinity
	var mine []*disruptionBudget
	for _, p := range c.m.pdbs {
		if p.Spec.Selector.matches(w.Spec.Template.Metadata.Labels) {
			mine = append(mine, p)
		}
	}
	if len(mine) != 1 {
		c.t.Fatalf("%d PodDisruptionBudgets of %s", len(mine), w.doc)
	}
	var pdb = mine[0]
	var broad = labelSelector{MatchLabels: map[string]string{"app.kubernetes.io/component": "member"}}
	for _, tc := range []struct {
		name string
		edit func(w *workload, p *disruptionBudget, m *manifests)
		want string
	}{
		{"no budget", func(_ *workload, _ *disruptionBudget, m *manifests) { m.pdbs = nil }, "no PodDisruptionBudget"},
		{"none may go", func(_ *workload, p *disruptionBudget, _ *manifests) {
			p.Spec.MaxUnavailable, p.Spec.MinAvailable = nil, *w.Spec.Replicas
		}, "a drain would wait forever"},
		{"all may go", func(_ *workload, p *disruptionBudget, _ *manifests) { p.Spec.MaxUnavailable = "100%" }, "lets 2 of the 2"},
		{"every group's members", func(_ *workload, p *disruptionBudget, _ *manifests) { p.Spec.Selector = broad }, "selects pods of other workloads"},
		{"no anti-affinity", func(w *workload, _ *disruptionBudget, _ *manifests) { w.pod().Affinity = nil }, "podAntiAffinity: is not set"},
		{"required anti-affinity", func(w *workload, _ *disruptionBudget, _ *manifests) {
			var a = own
			a.Required = []affinityTerm{a.Preferred[0].Term}
			w.pod().Affinity = &affinity{PodAntiAffinity: &a}
		}, "would stay pending"},
		{"by zone only", func(w *workload, _ *disruptionBudget, _ *manifests) {
			var a = own
			a.Preferred = slices.Clone(a.Preferred)
			a.Preferred[0].Term.TopologyKey = "topology.kubernetes.io/zone"
			w.pod().Affinity = &affinity{PodAntiAffinity: &a}
		}, "no term spreading the members by kubernetes.io/hostname"},
		{"every group's members apart", func(w *workload, _ *disruptionBudget, _ *manifests) {
			var a = own
			a.Preferred = slices.Clone(a.Preferred)
			a.Preferred[0].Term.LabelSelector = broad
			w.pod().Affinity = &affinity{PodAntiAffinity: &a}
		}, "selects pods of other workloads too"},
	} {
		var mw, mp = *w, *pdb
		var mm = *c.m
		mm.pdbs = slices.Clone(c.m.pdbs)
		mm.pdbs[slices.Index(mm.pdbs, pdb)] = &mp
		mm.workloads = slices.Clone(c.m.workloads)
		mm.workloads[slices.Index(mm.workloads, w)] = &mw
		tc.edit(&mw, &mp, &mm)
		var failures []string
		var rc = *c
		rc.m, rc.record = &mm, &failures
		rc.checkDisruptions(&mw)
		if !strings.Contains(strings.Join(failures, "\n"), tc.want) {
			c.t.Errorf("%s: checkDisruptions reported %q, not %q", tc.name, failures, tc.want)
		}
	}
}
