package deploy_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v2"
)

// overlay is the kustomization the test renders, relative to deploy/.
const overlay = "k8s/overlays/bank"

// placeholderImage is the image of the consumer base, which overlays replace.
const placeholderImage = "consumer/image"

// consumerBinary is where deploy/Dockerfile installs the consumer command.
const consumerBinary = "/usr/local/bin/consumer"

// operatorSecrets are the Secrets that the manifests reference without
// holding them: the operator creates them, with these keys, as
// docs/deploy.md says.
var operatorSecrets = map[string][]string{
	"gazconsumer-tls":  {"tls.crt", "tls.key", "ca.crt"},
	"gazconsumer-auth": {"broker-auth-keys", "consumer-auth-keys"},
}

// specCopies are the spec files the overlay applies, by the example's spec
// each copies (paths relative to the repository's root): the same YAML, but
// for "revision: -1" on each journal and shard.
var specCopies = map[string]string{
	"deploy/k8s/overlays/bank/journals.yaml":           "example/specs/journals.yaml",
	"deploy/k8s/overlays/bank/ledger/shards.yaml":      "example/specs/ledger-shards.yaml",
	"deploy/k8s/overlays/bank/leaderboard/shards.yaml": "example/specs/leaderboard-shards.yaml",
}

// TestManifests renders the bank overlay and checks it against the binaries
// it runs and the objects it references. Every failure names the document
// (kind, namespace/name and its index in the rendered stream) and the field.
func TestManifests(t *testing.T) {
	var root = repoRoot(t)
	var m = render(t, root)
	var bins = buildBinaries(t, root, m.consumerCommands())
	var c = &checker{t: t, root: root, m: m, bins: bins}

	t.Run("VendoredGazetteBases", func(t *testing.T) { checkVendoredBases(t, root) })
	// Each subtest reports through its own checker (c.with(t)).
	var sub = func(name string, check func(*checker)) {
		t.Run(name, func(t *testing.T) { check(c.with(t)) })
	}
	sub("SpecCopies", func(c *checker) { c.checkSpecCopies() })
	sub("Images", func(c *checker) { c.forContainers(c.checkImage) })
	sub("PortsAndProbes", func(c *checker) { c.forContainers(c.checkProbePorts) })
	sub("Members", func(c *checker) { c.forContainers(c.checkMember) })
	sub("MemberProbesCatchMistakes", func(c *checker) { c.checkMemberProbesCatchMistakes() })
	sub("FlagsAndEnvironment", func(c *checker) { c.forContainers(c.checkFlagsAndEnv) })
	sub("MountedFiles", func(c *checker) { c.forContainers(c.checkMountedFiles) })
	sub("SecretsAndConfigMaps", func(c *checker) { c.checkReferences() })
	sub("ServicesAndAddresses", func(c *checker) {
		c.checkServices()
		c.forContainers(c.checkAddresses)
	})
	sub("Dockerfile", func(c *checker) { c.checkDockerfile() })
	sub("BrokerGatewayFenced", func(c *checker) { c.checkBrokerGatewayFenced() })
	sub("MemberMemory", func(c *checker) { c.forContainers(c.checkMemory) })
	sub("MemberMemoryCatchesMistakes", func(c *checker) { c.checkMemoryCatchesMistakes() })
	sub("MemberDisruptions", func(c *checker) { c.forWorkloads(c.checkDisruptions) })
	sub("MemberDisruptionsCatchMistakes", func(c *checker) { c.checkDisruptionsCatchMistakes() })
}

// ---- Rendering and decoding ------------------------------------------------

type meta struct {
	Name        string            `yaml:"name"`
	Namespace   string            `yaml:"namespace"`
	Labels      map[string]string `yaml:"labels"`
	Annotations map[string]string `yaml:"annotations"`
}

// document is one object of the rendered manifests.
type document struct {
	Index    int    `yaml:"-"`
	Kind     string `yaml:"kind"`
	Metadata meta   `yaml:"metadata"`
	raw      []byte
}

func (d *document) String() string {
	return fmt.Sprintf("%s %s/%s (document %d)", d.Kind, d.Metadata.Namespace, d.Metadata.Name, d.Index)
}

type keyToPath struct {
	Key  string `yaml:"key"`
	Path string `yaml:"path"`
}

type volume struct {
	Name   string `yaml:"name"`
	Secret *struct {
		SecretName string      `yaml:"secretName"`
		Items      []keyToPath `yaml:"items"`
		Optional   bool        `yaml:"optional"`
	} `yaml:"secret"`
	ConfigMap *struct {
		Name     string      `yaml:"name"`
		Items    []keyToPath `yaml:"items"`
		Optional bool        `yaml:"optional"`
	} `yaml:"configMap"`
}

type keyRef struct {
	Name     string `yaml:"name"`
	Key      string `yaml:"key"`
	Optional bool   `yaml:"optional"`
}

type envVar struct {
	Name      string `yaml:"name"`
	Value     string `yaml:"value"`
	ValueFrom *struct {
		SecretKeyRef    *keyRef `yaml:"secretKeyRef"`
		ConfigMapKeyRef *keyRef `yaml:"configMapKeyRef"`
		FieldRef        *struct {
			FieldPath string `yaml:"fieldPath"`
		} `yaml:"fieldRef"`
	} `yaml:"valueFrom"`
}

type probe struct {
	TCPSocket *struct {
		Port string `yaml:"port"`
	} `yaml:"tcpSocket"`
	HTTPGet *struct {
		Path   string `yaml:"path"`
		Port   string `yaml:"port"`
		Scheme string `yaml:"scheme"`
	} `yaml:"httpGet"`
	GRPC *struct {
		Port string `yaml:"port"`
	} `yaml:"grpc"`
	Exec *struct {
		Command []string `yaml:"command"`
	} `yaml:"exec"`
}

// port is the port a probe checks, by name or number.
func (p *probe) port() string {
	switch {
	case p.TCPSocket != nil:
		return p.TCPSocket.Port
	case p.HTTPGet != nil:
		return p.HTTPGet.Port
	case p.GRPC != nil:
		return p.GRPC.Port
	}
	return ""
}

type container struct {
	Name    string   `yaml:"name"`
	Image   string   `yaml:"image"`
	Command []string `yaml:"command"`
	Args    []string `yaml:"args"`
	Env     []envVar `yaml:"env"`
	EnvFrom []struct {
		SecretRef    *keyRef `yaml:"secretRef"`
		ConfigMapRef *keyRef `yaml:"configMapRef"`
	} `yaml:"envFrom"`
	Ports []struct {
		Name          string `yaml:"name"`
		ContainerPort int    `yaml:"containerPort"`
	} `yaml:"ports"`
	Resources      resources `yaml:"resources"`
	ReadinessProbe *probe    `yaml:"readinessProbe"`
	LivenessProbe  *probe    `yaml:"livenessProbe"`
	StartupProbe   *probe    `yaml:"startupProbe"`
	VolumeMounts   []struct {
		Name      string `yaml:"name"`
		MountPath string `yaml:"mountPath"`
		SubPath   string `yaml:"subPath"`
	} `yaml:"volumeMounts"`
}

type podSpec struct {
	TerminationGracePeriodSeconds *int64 `yaml:"terminationGracePeriodSeconds"`
	SecurityContext               struct {
		RunAsUser *int64 `yaml:"runAsUser"`
	} `yaml:"securityContext"`
	Affinity       *affinity   `yaml:"affinity"`
	InitContainers []container `yaml:"initContainers"`
	Containers     []container `yaml:"containers"`
	Volumes        []volume    `yaml:"volumes"`
}

// workload is a Deployment, StatefulSet, DaemonSet or Job.
type workload struct {
	doc  *document
	Spec struct {
		ServiceName string `yaml:"serviceName"`
		Replicas    *int   `yaml:"replicas"`
		Template    struct {
			Metadata meta    `yaml:"metadata"`
			Spec     podSpec `yaml:"spec"`
		} `yaml:"template"`
	} `yaml:"spec"`
}

func (w *workload) pod() *podSpec { return &w.Spec.Template.Spec }

type service struct {
	doc  *document
	Spec struct {
		ClusterIP string            `yaml:"clusterIP"`
		Selector  map[string]string `yaml:"selector"`
		Ports     []servicePort     `yaml:"ports"`
	} `yaml:"spec"`
}

type servicePort struct {
	Name       string `yaml:"name"`
	Port       int    `yaml:"port"`
	TargetPort string `yaml:"targetPort"`
}

type dataObject struct {
	doc  *document
	Data map[string]string `yaml:"data"`
}

// manifests are the decoded documents of the rendered overlay.
type manifests struct {
	docs       []*document
	workloads  []*workload
	services   []*service
	configMaps map[string]*dataObject // By namespace/name.
	secrets    map[string]*dataObject // By namespace/name.
	policies   []*networkPolicy
	pdbs       []*disruptionBudget
}

type labelSelector struct {
	MatchLabels      map[string]string `yaml:"matchLabels"`
	MatchExpressions []struct {
		Key      string   `yaml:"key"`
		Operator string   `yaml:"operator"`
		Values   []string `yaml:"values"`
	} `yaml:"matchExpressions"`
}

// matches reports whether the selector selects labels.
func (s *labelSelector) matches(labels map[string]string) bool {
	for k, v := range s.MatchLabels {
		if labels[k] != v {
			return false
		}
	}
	for _, e := range s.MatchExpressions {
		var v, ok = labels[e.Key]
		switch e.Operator {
		case "In":
			if !ok || !slices.Contains(e.Values, v) {
				return false
			}
		case "NotIn":
			if ok && slices.Contains(e.Values, v) {
				return false
			}
		case "Exists":
			if !ok {
				return false
			}
		case "DoesNotExist":
			if ok {
				return false
			}
		default:
			return false
		}
	}
	return true
}

type networkPolicy struct {
	doc  *document
	Spec struct {
		PodSelector labelSelector `yaml:"podSelector"`
		PolicyTypes []string      `yaml:"policyTypes"`
		Ingress     []struct {
			From []struct {
				PodSelector       *labelSelector `yaml:"podSelector"`
				NamespaceSelector *labelSelector `yaml:"namespaceSelector"`
				IPBlock           any            `yaml:"ipBlock"`
			} `yaml:"from"`
		} `yaml:"ingress"`
	} `yaml:"spec"`
}

func repoRoot(t *testing.T) string {
	var root, err = filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err = os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("the repository's root: %v", err)
	}
	return root
}

// render runs `kubectl kustomize` on the overlay and decodes its documents.
func render(t *testing.T, root string) *manifests {
	var kubectl, err = exec.LookPath("kubectl")
	if err != nil {
		t.Fatalf("kubectl, which renders the manifests (kubectl kustomize deploy/%s), is not on PATH: %v; install it to run this test", overlay, err)
	}
	var stdout, stderr bytes.Buffer
	var cmd = exec.CommandContext(t.Context(), kubectl, "kustomize", filepath.Join(root, "deploy", filepath.FromSlash(overlay)))
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err = cmd.Run(); err != nil {
		t.Fatalf("kubectl kustomize deploy/%s: %v\n%s", overlay, err, stderr.String())
	}

	var m = &manifests{configMaps: map[string]*dataObject{}, secrets: map[string]*dataObject{}}
	var dec = yaml.NewDecoder(&stdout)
	for i := 0; ; i++ {
		var v any
		if err = dec.Decode(&v); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("decoding document %d of the rendered manifests: %v", i, err)
		} else if v == nil {
			continue
		}
		raw, err := yaml.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		var d = &document{Index: i, raw: raw}
		decodeAs(t, d, d)

		switch d.Kind {
		case "Deployment", "StatefulSet", "DaemonSet", "Job":
			var w = &workload{doc: d}
			decodeAs(t, d, w)
			m.workloads = append(m.workloads, w)
		case "Service":
			var s = &service{doc: d}
			decodeAs(t, d, s)
			m.services = append(m.services, s)
		case "PodDisruptionBudget":
			var p = &disruptionBudget{doc: d}
			decodeAs(t, d, p)
			m.pdbs = append(m.pdbs, p)
		case "NetworkPolicy":
			var p = &networkPolicy{doc: d}
			decodeAs(t, d, p)
			m.policies = append(m.policies, p)
		case "ConfigMap", "Secret":
			var o = &dataObject{doc: d}
			decodeAs(t, d, o)
			if d.Kind == "ConfigMap" {
				m.configMaps[d.Metadata.Namespace+"/"+d.Metadata.Name] = o
			} else {
				m.secrets[d.Metadata.Namespace+"/"+d.Metadata.Name] = o
			}
		}
		m.docs = append(m.docs, d)
	}
	if len(m.workloads) == 0 {
		t.Fatalf("kubectl kustomize deploy/%s rendered no workloads", overlay)
	}
	return m
}

func decodeAs(t *testing.T, d *document, v any) {
	t.Helper()
	if err := yaml.Unmarshal(d.raw, v); err != nil {
		t.Fatalf("%s: decoding: %v", d, err)
	}
}

// consumerCommands are the consumer commands the manifests run, by the
// names of their images (gazconsumer/ledger:dev runs ./example/cmd/ledger).
func (m *manifests) consumerCommands() []string {
	var names []string
	for _, w := range m.workloads {
		for _, c := range w.containers() {
			if r := runsOf(c.c); r.binary == consumerBinary {
				if n := imageName(c.c.Image); !slices.Contains(names, n) {
					names = append(names, n)
				}
			}
		}
	}
	return names
}

// ---- Binaries and their help -----------------------------------------------

// help is what a command's help says of its flags.
type help struct {
	name  string
	flags map[string]flagHelp // By name, without dashes.
	envs  map[string]string   // Flag by environment variable.
}

type flagHelp struct{ env, def string }

type binaries struct {
	consumers map[string]*help // By command name.
	gazctl    map[string]*help // By subcommand, e.g. "journals apply".
	gazette   *help            // gazette serve.
}

// buildBinaries builds the consumer commands, gazctl and gazette (the
// versions go.mod requires) and reads their help.
func buildBinaries(t *testing.T, root string, consumers []string) *binaries {
	var goBin, err = exec.LookPath("go")
	if err != nil {
		t.Fatalf("go is not on PATH: %v", err)
	}
	var dir = t.TempDir()
	var args = []string{"build", "-o", dir + string(filepath.Separator)}
	for _, name := range consumers {
		if _, err := os.Stat(filepath.Join(root, "example", "cmd", name, "main.go")); err != nil {
			t.Fatalf("the manifests run image %q, but there is no consumer command ./example/cmd/%s: %v", name, name, err)
		}
		args = append(args, "./example/cmd/"+name)
	}
	args = append(args, "go.gazette.dev/core/cmd/gazctl", "go.gazette.dev/core/cmd/gazette")
	var cmd = exec.CommandContext(t.Context(), goBin, args...)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}

	var b = &binaries{consumers: map[string]*help{}, gazctl: map[string]*help{}}
	for _, name := range consumers {
		b.consumers[name] = parseGoFlagHelp(t, name, runHelp(t, filepath.Join(dir, name), "-help"))
	}
	for _, sub := range []string{"journals apply", "shards apply"} {
		var args = append(strings.Fields(sub), "--help")
		b.gazctl[sub] = parseGoFlagsHelp(t, "gazctl "+sub, runHelp(t, filepath.Join(dir, "gazctl"), args...))
	}
	b.gazette = parseGoFlagsHelp(t, "gazette serve", runHelp(t, filepath.Join(dir, "gazette"), "serve", "--help"))
	return b
}

// runHelp runs a binary for its help, which the flag package prints to
// stderr before exiting with 0 (or 2, before Go 1.16), and go-flags prints
// to stdout before gazctl and gazette exit with 1.
func runHelp(t *testing.T, bin string, args ...string) string {
	var cmd = exec.CommandContext(t.Context(), bin, args...)
	var out, err = cmd.CombinedOutput()
	var exit *exec.ExitError
	if err != nil && !(errors.As(err, &exit) && exit.ExitCode() <= 2 && bytes.Contains(out, []byte("Usage"))) {
		t.Fatalf("%s %s: %v\n%s", bin, strings.Join(args, " "), err, out)
	}
	return string(out)
}

var (
	goFlagLine = regexp.MustCompile(`^  -([a-z][a-z0-9.\-]*)`)
	envNote    = regexp.MustCompile(`\(env ([A-Z][A-Z0-9_]*)\)`)
	defaultOf  = regexp.MustCompile(`\(default "?([^")]*)"?\)`)
)

// parseGoFlagHelp parses the usage that Go's flag package prints: a flag per
// line ("  -name type"), then its description, whose "(env NAME)" names the
// flag's environment variable.
func parseGoFlagHelp(t *testing.T, name, text string) *help {
	var h = &help{name: name, flags: map[string]flagHelp{}, envs: map[string]string{}}
	var current string
	for _, line := range strings.Split(text, "\n") {
		if m := goFlagLine.FindStringSubmatch(line); m != nil {
			current = m[1]
			h.flags[current] = flagHelp{}
			line = line[len(m[0]):]
		}
		if current == "" {
			continue
		}
		var f = h.flags[current]
		if m := envNote.FindStringSubmatch(line); m != nil {
			f.env = m[1]
			h.envs[m[1]] = current
		}
		if m := defaultOf.FindStringSubmatch(line); m != nil {
			f.def = m[1]
		}
		h.flags[current] = f
	}
	if len(h.flags) == 0 {
		t.Fatalf("%s -help printed no flags:\n%s", name, text)
	}
	return h
}

var (
	wrapped        = regexp.MustCompile(`-\n\s*`)
	goFlagsFlag    = regexp.MustCompile(`(?m)^\s+(?:-[A-Za-z], )?--([a-z][a-z0-9.\-]*)`)
	goFlagsEnvNote = regexp.MustCompile(`\[\$([A-Z][A-Z0-9_]*)\]`)
)

// parseGoFlagsHelp parses the help of github.com/jessevdk/go-flags (gazctl,
// gazette), which wraps its descriptions at 80 columns and hyphenates words
// too long for a line, environment variables included ("[$BROKER_CERT_KEY_FIL-
// E]"): the hyphenations are undone first.
func parseGoFlagsHelp(t *testing.T, name, text string) *help {
	var h = &help{name: name, flags: map[string]flagHelp{}, envs: map[string]string{}}
	text = wrapped.ReplaceAllString(text, "")
	var locs = goFlagsFlag.FindAllStringSubmatchIndex(text, -1)
	for i, loc := range locs {
		var flag = text[loc[2]:loc[3]]
		var end = len(text)
		if i+1 < len(locs) {
			end = locs[i+1][0]
		}
		var f flagHelp
		if m := goFlagsEnvNote.FindStringSubmatch(text[loc[1]:end]); m != nil {
			f.env = m[1]
			h.envs[m[1]] = flag
		}
		h.flags[flag] = f
	}
	if len(h.flags) == 0 || len(h.envs) == 0 {
		t.Fatalf("%s --help printed no flags or no environment variables:\n%s", name, text)
	}
	return h
}

// ---- Containers --------------------------------------------------------------

// containerRef is a container of a workload, and the path of its field.
type containerRef struct {
	w     *workload
	c     *container
	field string // e.g. spec.template.spec.containers[consumer]
}

func (w *workload) containers() []containerRef {
	var out []containerRef
	var p = w.pod()
	for i := range p.InitContainers {
		out = append(out, containerRef{w, &p.InitContainers[i], "spec.template.spec.initContainers[" + p.InitContainers[i].Name + "]"})
	}
	for i := range p.Containers {
		out = append(out, containerRef{w, &p.Containers[i], "spec.template.spec.containers[" + p.Containers[i].Name + "]"})
	}
	return out
}

// runs is what a container runs: the binary, its subcommand, and the flags
// it is given, on its command line or in the shell script that execs it.
type runs struct {
	binary string   // As named by the command or the script's exec.
	sub    []string // Subcommand words, e.g. [journals apply].
	flags  []flagArg
	script string // Of a shell-wrapped command.
}

type flagArg struct {
	name, value string
	where       string // The field holding it.
}

var (
	scriptExec = regexp.MustCompile(`(?m)\bexec[ \t]+(\S+)((?:[ \t]+[a-z][a-z-]*)*)`)
	scriptFlag = regexp.MustCompile(`(?:^|\s)--([a-z][a-z0-9.\-]*)(?:[= ]("[^"]*"|\S+))?`)
)

func runsOf(c *container) runs {
	var r runs
	var words []string // Command-line words after the binary.
	switch {
	case len(c.Command) >= 3 && (path.Base(c.Command[0]) == "sh" || path.Base(c.Command[0]) == "bash") && strings.HasPrefix(c.Command[1], "-") && strings.Contains(c.Command[1], "c"):
		r.script = c.Command[2]
		if m := scriptExec.FindStringSubmatch(r.script); m != nil {
			r.binary, r.sub = m[1], strings.Fields(m[2])
		}
		for _, m := range scriptFlag.FindAllStringSubmatch(r.script, -1) {
			r.flags = append(r.flags, flagArg{name: m[1], value: strings.Trim(m[2], `"`), where: "command (its script)"})
		}
		if len(c.Command) > 4 { // sh -c SCRIPT $0 ARGS...
			words = append(words, c.Command[4:]...)
		}
	case len(c.Command) > 0:
		r.binary, words = c.Command[0], append(words, c.Command[1:]...)
	}
	var fromArgs = len(words)
	words = append(words, c.Args...)
	for i := 0; i < len(words); i++ {
		var w, where = words[i], "command"
		if i >= fromArgs {
			where = fmt.Sprintf("args[%d]", i-fromArgs)
		}
		if !strings.HasPrefix(w, "-") {
			if len(r.flags) == 0 && r.script == "" {
				r.sub = append(r.sub, w)
			}
			continue
		}
		var name, value, ok = strings.Cut(strings.TrimLeft(w, "-"), "=")
		if !ok && i+1 < len(words) && !strings.HasPrefix(words[i+1], "-") {
			value = words[i+1] // --flag VALUE
			i++
		}
		r.flags = append(r.flags, flagArg{name: name, value: value, where: where})
	}
	return r
}

// imageName is the last element of an image's repository, without tag.
func imageName(image string) string {
	var name = image
	if i := strings.IndexByte(name, '@'); i >= 0 {
		name = name[:i]
	}
	name = path.Base(name)
	if i := strings.IndexByte(name, ':'); i >= 0 {
		name = name[:i]
	}
	return name
}

// checker runs the checks of one subtest.
type checker struct {
	t    *testing.T
	root string
	m    *manifests
	bins *binaries
	// record, if set, collects failures instead of reporting them.
	record *[]string
}

func (c *checker) with(t *testing.T) *checker { var d = *c; d.t = t; return &d }

// fail reports a failed check of field of document d.
func (c *checker) fail(d *document, field, format string, args ...any) {
	c.t.Helper()
	if c.record != nil {
		*c.record = append(*c.record, fmt.Sprintf("%s: %s", field, fmt.Sprintf(format, args...)))
		return
	}
	c.t.Errorf("%s: %s: %s", d, field, fmt.Sprintf(format, args...))
}

func (c *checker) forContainers(check func(containerRef)) {
	for _, w := range c.m.workloads {
		for _, cr := range w.containers() {
			check(cr)
		}
	}
}

// helpOf returns the help of what a container runs, if the test knows it:
// a consumer command, a gazctl subcommand or gazette serve.
func (c *checker) helpOf(cr containerRef) (*help, runs) {
	var r = runsOf(cr.c)
	switch path.Base(r.binary) {
	case path.Base(consumerBinary):
		return c.bins.consumers[imageName(cr.c.Image)], r
	case "gazctl":
		var h = c.bins.gazctl[strings.Join(r.sub, " ")]
		if h == nil {
			c.fail(cr.w.doc, cr.field+".command", "runs gazctl %s, a subcommand whose help the test does not read", strings.Join(r.sub, " "))
		}
		return h, r
	case "gazette":
		if strings.Join(r.sub, " ") == "serve" {
			return c.bins.gazette, r
		}
	}
	return nil, r
}

// isConsumer reports whether the container runs a consumer command.
func isConsumer(cr containerRef) bool { return runsOf(cr.c).binary == consumerBinary }

// setting is the value a container gives a flag, from its command line or
// from the flag's environment variable, and the field that sets it.
type setting struct {
	value string
	field string
	set   bool
	ref   bool // From a Secret, ConfigMap or field reference.
}

func (c *checker) settingOf(cr containerRef, h *help, r runs, flag string) setting {
	for _, f := range r.flags {
		if f.name == flag {
			return setting{value: f.value, field: cr.field + "." + f.where + " --" + flag, set: true}
		}
	}
	var env = h.flags[flag].env
	for i, e := range cr.c.Env {
		if e.Name == env && env != "" {
			var s = setting{value: expand(cr.c.Env[:i], e.Value), field: cr.field + ".env[" + env + "]", set: true}
			s.ref = e.ValueFrom != nil
			return s
		}
	}
	return setting{value: h.flags[flag].def, field: cr.field + " (--" + flag + " is not set; its default)"}
}

var varRef = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

// expand expands the $(NAME) references of value as Kubernetes does, with
// the variables defined before it: a fieldRef expands to {fieldPath}.
func expand(before []envVar, value string) string {
	return varRef.ReplaceAllStringFunc(value, func(ref string) string {
		var name = varRef.FindStringSubmatch(ref)[1]
		for i := len(before) - 1; i >= 0; i-- {
			var e = before[i]
			if e.Name != name {
				continue
			} else if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
				return "{" + e.ValueFrom.FieldRef.FieldPath + "}"
			} else if e.ValueFrom != nil {
				return "{" + name + "}"
			}
			return expand(before[:i], e.Value)
		}
		return ref
	})
}

// ---- Checks ------------------------------------------------------------------

// checkVendoredBases checks that deploy/k8s/gazette/{broker,etcd} are the
// module's kustomize/bases/{broker,etcd}, byte for byte.
func checkVendoredBases(t *testing.T, root string) {
	var cmd = exec.CommandContext(t.Context(), "go", "list", "-m", "-f", "{{.Dir}}", "go.gazette.dev/core")
	cmd.Dir = root
	var out, err = cmd.Output()
	if err != nil || strings.TrimSpace(string(out)) == "" {
		t.Fatalf("go list -m -f {{.Dir}} go.gazette.dev/core: %v %s", err, out)
	}
	var module = strings.TrimSpace(string(out))
	for _, base := range []string{"broker", "etcd"} {
		var want = filepath.Join(module, "kustomize", "bases", base)
		var have = filepath.Join(root, "deploy", "k8s", "gazette", base)
		var wantFiles, haveFiles = listFiles(t, want), listFiles(t, have)
		if !reflect.DeepEqual(wantFiles, haveFiles) {
			t.Errorf("deploy/k8s/gazette/%s holds %v, but Gazette's kustomize/bases/%s holds %v: run deploy/k8s/sync-gazette-bases.sh", base, haveFiles, base, wantFiles)
			continue
		}
		for _, f := range wantFiles {
			var a, _ = os.ReadFile(filepath.Join(want, f))
			var b, _ = os.ReadFile(filepath.Join(have, f))
			if !bytes.Equal(a, b) {
				t.Errorf("deploy/k8s/gazette/%s/%s differs from Gazette's kustomize/bases/%s/%s: run deploy/k8s/sync-gazette-bases.sh", base, f, base, f)
			}
		}
	}
}

func listFiles(t *testing.T, dir string) []string {
	var files []string
	var err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			var rel, _ = filepath.Rel(dir, p)
			files = append(files, filepath.ToSlash(rel))
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// checkSpecCopies checks that the specs the overlay applies are the
// example's, but for revision -1 on each journal and shard, and that the
// rendered ConfigMaps hold them.
func (c *checker) checkSpecCopies() {
	for copyPath, origPath := range specCopies {
		var copyData, err = os.ReadFile(filepath.Join(c.root, copyPath))
		if err != nil {
			c.t.Error(err)
			continue
		}
		origData, err := os.ReadFile(filepath.Join(c.root, origPath))
		if err != nil {
			c.t.Error(err)
			continue
		}
		var copied, orig any
		if err = yaml.Unmarshal(copyData, &copied); err != nil {
			c.t.Errorf("%s: %v", copyPath, err)
			continue
		}
		if err = yaml.Unmarshal(origData, &orig); err != nil {
			c.t.Errorf("%s: %v", origPath, err)
			continue
		}
		var leaves, revised int
		countRevisions(copied, &leaves, &revised)
		if leaves == 0 || leaves != revised {
			c.t.Errorf("%s: %d of its %d journals or shards have revision -1 (all must: the Jobs apply them again)", copyPath, revised, leaves)
		}
		if stripped := stripRevisions(copied); !reflect.DeepEqual(stripped, orig) {
			c.t.Errorf("%s differs from %s other than by revision -1:\n%s\nvs\n%s", copyPath, origPath, mustYAML(stripped), mustYAML(orig))
		}
		var found bool
		for _, cm := range c.m.configMaps {
			for _, v := range cm.Data {
				found = found || v == string(copyData)
			}
		}
		if !found {
			c.t.Errorf("no rendered ConfigMap holds %s", copyPath)
		}
	}
}

// countRevisions counts the journals (nodes named without a trailing "/")
// and shards (entries with an "id") of a spec, and those of revision -1.
func countRevisions(v any, leaves, revised *int) {
	switch v := v.(type) {
	case map[any]any:
		var name, _ = v["name"].(string)
		var _, isShard = v["id"]
		var _, isLabel = v["value"]
		if isShard || (name != "" && !strings.HasSuffix(name, "/") && !isLabel && v["children"] == nil) {
			*leaves++
			if v["revision"] == -1 {
				*revised++
			}
		}
		for k, x := range v {
			if k != "labels" {
				countRevisions(x, leaves, revised)
			}
		}
	case []any:
		for _, x := range v {
			countRevisions(x, leaves, revised)
		}
	}
}

func stripRevisions(v any) any {
	switch v := v.(type) {
	case map[any]any:
		var out = map[any]any{}
		for k, x := range v {
			if k != "revision" {
				out[k] = stripRevisions(x)
			}
		}
		return out
	case []any:
		var out = make([]any, len(v))
		for i, x := range v {
			out[i] = stripRevisions(x)
		}
		return out
	}
	return v
}

func mustYAML(v any) string { var b, _ = yaml.Marshal(v); return string(b) }

// checkImage checks that a container names a real image, with a tag.
func (c *checker) checkImage(cr containerRef) {
	var img = cr.c.Image
	switch {
	case img == "":
		c.fail(cr.w.doc, cr.field+".image", "no image")
	case img == placeholderImage || strings.HasPrefix(img, placeholderImage+":"):
		c.fail(cr.w.doc, cr.field+".image", "%q is the base's placeholder, which the overlay must replace (images:)", img)
	case !strings.Contains(path.Base(img), ":") && !strings.Contains(img, "@"):
		c.fail(cr.w.doc, cr.field+".image", "%q has no tag or digest", img)
	}
}

// containerPort resolves a port, by name or number, among a container's.
func containerPort(c *container, port string) (int, bool) {
	for _, p := range c.Ports {
		if p.Name == port && port != "" || strconv.Itoa(p.ContainerPort) == port {
			return p.ContainerPort, true
		}
	}
	return 0, false
}

// checkProbePorts checks that every probe checks a port of its container.
func (c *checker) checkProbePorts(cr containerRef) {
	for name, p := range map[string]*probe{"readinessProbe": cr.c.ReadinessProbe, "livenessProbe": cr.c.LivenessProbe, "startupProbe": cr.c.StartupProbe} {
		if p == nil || p.Exec != nil {
			continue
		}
		if _, ok := containerPort(cr.c, p.port()); !ok {
			c.fail(cr.w.doc, cr.field+"."+name, "checks port %q, which is not a port of the container (%+v)", p.port(), cr.c.Ports)
		}
	}
}

// checkMember checks a consumer member: its port, probe, metrics
// annotations, grace period and advertised host.
func (c *checker) checkMember(cr containerRef) {
	if !isConsumer(cr) {
		return
	}
	var h, r = c.helpOf(cr)
	var d = cr.w.doc
	var tmpl = &cr.w.Spec.Template
	if cr.w.doc.Kind == "Job" {
		c.fail(d, cr.field, "a consumer member runs in a Job")
		return
	}

	// The port serves the Shard API and /metrics.
	var portSet = c.settingOf(cr, h, r, "consumer.port")
	var port, err = strconv.Atoi(portSet.value)
	if err != nil || !portSet.set {
		c.fail(d, portSet.field, "the member's port must be set to a number (it is %q): it is the container's port, its probe's and Prometheus'", portSet.value)
		return
	}
	if _, ok := containerPort(cr.c, strconv.Itoa(port)); !ok {
		c.fail(d, cr.field+".ports", "no containerPort %d, the member's port (%s)", port, portSet.field)
	}

	var tlsOn = c.settingOf(cr, h, r, "consumer.server-cert-file").value != ""
	var clientCA = c.settingOf(cr, h, r, "consumer.server-ca-file").value != ""
	c.checkMemberProbe(cr, h, "readinessProbe", cr.c.ReadinessProbe, "ready", port, tlsOn, clientCA)
	c.checkMemberProbe(cr, h, "livenessProbe", cr.c.LivenessProbe, "live", port, tlsOn, clientCA)

	// Prometheus scrapes /metrics on the member's port.
	var ann = tmpl.Metadata.Annotations
	var annField = "spec.template.metadata.annotations"
	if ann["prometheus.io/scrape"] != "true" {
		c.fail(d, annField+"[prometheus.io/scrape]", "is %q, not \"true\"", ann["prometheus.io/scrape"])
	}
	if ann["prometheus.io/port"] != strconv.Itoa(port) {
		c.fail(d, annField+"[prometheus.io/port]", "is %q, not the member's port %d", ann["prometheus.io/port"], port)
	}
	if ann["prometheus.io/path"] != "/metrics" {
		c.fail(d, annField+"[prometheus.io/path]", "is %q, not /metrics", ann["prometheus.io/path"])
	}
	if want := map[bool]string{true: "https", false: "http"}[tlsOn]; ann["prometheus.io/scheme"] != want && !(want == "http" && ann["prometheus.io/scheme"] == "") {
		c.fail(d, annField+"[prometheus.io/scheme]", "is %q, but the member's port serves %s", ann["prometheus.io/scheme"], want)
	}

	// SIGTERM hands the shards off for up to --consumer.handoff: the pod
	// must not be killed before.
	var handoffSet = c.settingOf(cr, h, r, "consumer.handoff")
	handoff, err := time.ParseDuration(handoffSet.value)
	if err != nil {
		c.fail(d, handoffSet.field, "handoff %q: %v", handoffSet.value, err)
	}
	var grace = 30 * time.Second // Kubernetes' default.
	if g := tmpl.Spec.TerminationGracePeriodSeconds; g != nil {
		grace = time.Duration(*g) * time.Second
	}
	if grace <= handoff {
		c.fail(d, "spec.template.spec.terminationGracePeriodSeconds", "%s is not longer than the handoff %s (%s)", grace, handoff, handoffSet.field)
	}

	// With TLS, clients check the host a member advertises against its
	// certificate: a StatefulSet's members advertise their DNS names under
	// the StatefulSet's headless Service.
	var host = c.settingOf(cr, h, r, "consumer.host")
	if tlsOn && cr.w.doc.Kind == "StatefulSet" {
		var svc = cr.w.Spec.ServiceName
		if !host.set || !strings.HasPrefix(host.value, "{metadata.name}."+svc+".") {
			c.fail(d, host.field, "advertises %q: members serving TLS advertise {metadata.name}.%s.<namespace>.svc..., their stable names, which one certificate covers", host.value, svc)
		}
	}
}

// checkMemberProbe checks a member's readiness or liveness probe (field
// name), which must check kind ("ready" or "live"): an exec probe running
// the member's own command, `consumer probe KIND --consumer.port=PORT`,
// with flags the command knows, on the member's port, presenting the
// member's peer certificate if it serves TLS; or, on a port without TLS, an
// HTTP GET of /debug/ready (readiness only: a liveness probe of it would
// restart a member that is joining or has a FAILED shard) or a gRPC probe
// (readiness only, for the same reason).
func (c *checker) checkMemberProbe(cr containerRef, h *help, name string, p *probe, kind string, port int, tlsOn, clientCA bool) {
	var d = cr.w.doc
	var field = cr.field + "." + name
	if p == nil {
		c.fail(d, field, "a member needs a %s probe: `%s probe %s --consumer.port=%d`", name, consumerBinary, kind, port)
		return
	}
	if p.Exec == nil {
		if n, ok := containerPort(cr.c, p.port()); !ok || n != port {
			c.fail(d, field, "checks port %q, not the member's port %d", p.port(), port)
		}
	}
	switch {
	case p.Exec != nil:
		var cmd = p.Exec.Command
		if len(cmd) < 3 || cmd[0] != consumerBinary || cmd[1] != "probe" || cmd[2] != kind {
			c.fail(d, field+".exec.command", "%q: want [%s probe %s --consumer.port=%d]", cmd, consumerBinary, kind, port)
			return
		}
		var probePort = ""
		if e := h.flags["consumer.port"].env; e != "" {
			for i, v := range cr.c.Env {
				if v.Name == e {
					probePort = expand(cr.c.Env[:i], v.Value)
				}
			}
		}
		for _, arg := range cmd[3:] {
			var name, value, _ = strings.Cut(strings.TrimLeft(arg, "-"), "=")
			if !strings.HasPrefix(arg, "--") {
				c.fail(d, field+".exec.command", "%q is not a --flag=value", arg)
			} else if _, ok := h.flags[name]; !ok {
				c.fail(d, field+".exec.command", "--%s is not a flag of %s", name, cr.c.Image)
			} else if name == "consumer.port" {
				probePort = value
			}
		}
		if probePort != strconv.Itoa(port) {
			c.fail(d, field+".exec.command", "probes port %q, not the member's port %d (set --consumer.port=%d)", probePort, port, port)
		}
		if tlsOn && c.settingOf(cr, h, runsOf(cr.c), "consumer.peer-cert-file").value == "" {
			c.fail(d, field, "the member serves TLS: its probe presents the peer certificate, which is not set (CONSUMER_PEER_CERT_FILE)")
		}
	case tlsOn || clientCA:
		c.fail(d, field, "the member serves mutual TLS, which the kubelet's HTTP, gRPC and TCP probes don't present: probe with exec `%s probe %s`", consumerBinary, kind)
	case kind == "live":
		c.fail(d, field, "a member's liveness probe is exec `%s probe live`: an HTTP or gRPC probe of readiness would restart a member that is joining or has a FAILED shard, and a TCP probe succeeds while the process is wedged", consumerBinary)
	case p.HTTPGet != nil && p.HTTPGet.Path != "/debug/ready":
		c.fail(d, field+".httpGet.path", "%q: a member's readiness is served at /debug/ready", p.HTTPGet.Path)
	case p.TCPSocket != nil:
		c.fail(d, field+".tcpSocket", "a TCP probe says nothing of readiness: probe /debug/ready")
	}
}

// checkMemberProbesCatchMistakes checks that checkMember refuses, in a
// member of the overlay, probes that would not work or that would restart a
// member that is only not ready.
func (c *checker) checkMemberProbesCatchMistakes() {
	var member *containerRef
	c.forContainers(func(cr containerRef) {
		if isConsumer(cr) && member == nil && cr.w.doc.Kind == "StatefulSet" {
			member = &cr
		}
	})
	if member == nil {
		c.t.Fatal("no member in the overlay")
	}
	var exec = func(words ...string) *probe {
		var p = new(probe)
		p.Exec = &struct {
			Command []string `yaml:"command"`
		}{words}
		return p
	}
	var tcp = new(probe)
	tcp.TCPSocket = &struct {
		Port string `yaml:"port"`
	}{"8080"}
	var httpReady = new(probe)
	httpReady.HTTPGet = &struct {
		Path   string `yaml:"path"`
		Port   string `yaml:"port"`
		Scheme string `yaml:"scheme"`
	}{"/debug/ready", "8080", "HTTPS"}
	for _, tc := range []struct {
		name             string
		readiness, liven *probe
		want             string
	}{
		{"no liveness probe", member.c.ReadinessProbe, nil, "needs a livenessProbe probe"},
		{"a TCP readiness probe", tcp, member.c.LivenessProbe, "mutual TLS"},
		{"an HTTPS GET of /debug/ready", httpReady, member.c.LivenessProbe, "mutual TLS"},
		{"liveness probing readiness", member.c.ReadinessProbe, exec(consumerBinary, "probe", "ready", "--consumer.port=8080"), "want [" + consumerBinary + " probe live"},
		{"another port", exec(consumerBinary, "probe", "ready", "--consumer.port=9000"), member.c.LivenessProbe, `probes port "9000"`},
		{"no port", exec(consumerBinary, "probe", "ready"), member.c.LivenessProbe, `probes port ""`},
		{"an unknown flag", exec(consumerBinary, "probe", "ready", "--consumer.port=8080", "--probe.timeout=3s"), member.c.LivenessProbe, "--probe.timeout is not a flag"},
	} {
		var mutated = *member.c
		mutated.ReadinessProbe, mutated.LivenessProbe = tc.readiness, tc.liven
		var cr = *member
		cr.c = &mutated
		var failures []string
		var rc = *c
		rc.record = &failures
		rc.checkMember(cr)
		if !strings.Contains(strings.Join(failures, "\n"), tc.want) {
			c.t.Errorf("%s: checkMember reported %q, not %q", tc.name, failures, tc.want)
		}
	}
}

// checkBrokerGatewayFenced checks that brokers (`gazette serve`) that
// require authorization but not client certificates are fenced by a
// NetworkPolicy: their HTTP gateway signs every request with the broker's
// key, so only pods that hold the brokers' keys anyway (brokers, and pods
// with BROKER_AUTH_KEYS) may reach them; and that every pod that talks to
// the brokers (BROKER_ADDRESS) is admitted.
func (c *checker) checkBrokerGatewayFenced() {
	var holdsKeys = func(w *workload) bool {
		for _, cr := range w.containers() {
			if r := runsOf(cr.c); path.Base(r.binary) == "gazette" {
				return true
			}
			for _, e := range cr.c.Env {
				if e.Name == "BROKER_AUTH_KEYS" {
					return true
				}
			}
		}
		return false
	}
	var envOf = func(cr containerRef, name string) bool {
		for _, e := range cr.c.Env {
			if e.Name == name {
				return true
			}
		}
		return false
	}
	var brokers int
	for _, w := range c.m.workloads {
		var serves, keyed, clientCA bool
		for _, cr := range w.containers() {
			if r := runsOf(cr.c); path.Base(r.binary) == "gazette" && strings.Join(r.sub, " ") == "serve" {
				serves, keyed, clientCA = true, envOf(cr, "BROKER_AUTH_KEYS"), envOf(cr, "BROKER_SERVER_CA_FILE")
			}
		}
		if !serves || !keyed || clientCA {
			continue
		}
		brokers++
		var labels = w.Spec.Template.Metadata.Labels
		var fenced bool
		var admits = func(pod map[string]string) bool {
			for _, p := range c.m.policies {
				if p.doc.Metadata.Namespace != w.doc.Metadata.Namespace || !p.Spec.PodSelector.matches(labels) {
					continue
				}
				for _, rule := range p.Spec.Ingress {
					for _, from := range rule.From {
						if from.PodSelector != nil && from.NamespaceSelector == nil && from.IPBlock == nil && from.PodSelector.matches(pod) {
							return true
						}
					}
				}
			}
			return false
		}
		for _, p := range c.m.policies {
			if p.doc.Metadata.Namespace != w.doc.Metadata.Namespace || !p.Spec.PodSelector.matches(labels) || !slices.Contains(p.Spec.PolicyTypes, "Ingress") {
				continue
			}
			fenced = true
			for i, rule := range p.Spec.Ingress {
				if len(rule.From) == 0 {
					c.fail(p.doc, fmt.Sprintf("spec.ingress[%d]", i), "admits every pod to the brokers, whose HTTP gateway signs unsigned requests with their own key")
				}
				for j, from := range rule.From {
					if from.PodSelector == nil || from.NamespaceSelector != nil || from.IPBlock != nil {
						c.fail(p.doc, fmt.Sprintf("spec.ingress[%d].from[%d]", i, j), "admits peers other than pods of the namespace: the brokers' HTTP gateway serves them unsigned")
					}
				}
			}
		}
		if !fenced {
			c.fail(w.doc, "spec.template.metadata.labels", "brokers require authorization (BROKER_AUTH_KEYS) but their HTTP gateway signs every request with their own key: no NetworkPolicy fences their port")
			continue
		}
		for _, o := range c.m.workloads {
			var pod = o.Spec.Template.Metadata.Labels
			if o.doc.Metadata.Namespace != w.doc.Metadata.Namespace {
				continue
			}
			var talks bool
			for _, cr := range o.containers() {
				talks = talks || envOf(cr, "BROKER_ADDRESS")
			}
			switch admitted := admits(pod); {
			case admitted && !holdsKeys(o):
				c.fail(o.doc, "spec.template.metadata.labels", "is admitted to the brokers, whose HTTP gateway it could use unsigned, but holds no BROKER_AUTH_KEYS")
			case !admitted && talks && o != w:
				c.fail(o.doc, "spec.template.metadata.labels", "talks to the brokers (BROKER_ADDRESS) but no NetworkPolicy admits it")
			}
		}
	}
	if brokers == 0 {
		c.t.Errorf("no brokers requiring authorization in the overlay: the check checked nothing")
	}
}

var prefixedEnv = regexp.MustCompile(`^(ETCD|BROKER|CONSUMER|LOG|ROCKSDB)_`)

// checkFlagsAndEnv checks that the flags and environment variables of a
// container running a consumer, gazctl or gazette are ones it knows, and
// that $(NAME) references name variables defined before them.
func (c *checker) checkFlagsAndEnv(cr containerRef) {
	var d = cr.w.doc
	// Kubernetes expands $(NAME) in env values only with the variables
	// defined above; in command and args, with all of them.
	for i, e := range cr.c.Env {
		for _, m := range varRef.FindAllStringSubmatch(e.Value, -1) {
			if !slices.ContainsFunc(cr.c.Env[:i], func(x envVar) bool { return x.Name == m[1] }) {
				c.fail(d, cr.field+".env["+e.Name+"].value", "references $(%s), which is not defined above it (Kubernetes would leave it as is)", m[1])
			}
		}
	}
	for i, a := range slices.Concat(cr.c.Command, cr.c.Args) {
		for _, m := range varRef.FindAllStringSubmatch(a, -1) {
			if !slices.ContainsFunc(cr.c.Env, func(x envVar) bool { return x.Name == m[1] }) {
				c.fail(d, fmt.Sprintf("%s command/args[%d]", cr.field, i), "references $(%s), which is not in env", m[1])
			}
		}
	}

	var h, r = c.helpOf(cr)
	if h == nil {
		return
	}
	for _, f := range r.flags {
		if _, ok := h.flags[f.name]; !ok {
			c.fail(d, cr.field+"."+f.where, "--%s is not a flag of %s", f.name, h.name)
		}
	}
	var broker = path.Base(r.binary) == "gazette"
	for _, e := range cr.c.Env {
		var field = cr.field + ".env[" + e.Name + "]"
		switch {
		case h.envs[e.Name] != "":
		case broker && strings.HasPrefix(e.Name, "BROKER_"):
			c.fail(d, field, "%s is not the variable of a flag of %s", e.Name, h.name)
		case broker:
			// Gazette's base sets variables of its own (NODE_NAME, SDKs').
		case isConsumer(cr) && slices.Contains(goRuntimeEnv, e.Name):
			// The Go runtime's (GOMEMLIMIT: see checkMemory).
		case prefixedEnv.MatchString(e.Name):
			c.fail(d, field, "%s is not the variable of a flag of %s", e.Name, h.name)
		case !usesVar(cr.c, e.Name, r.script):
			c.fail(d, field, "%s is neither the variable of a flag of %s nor used by another variable or the command", e.Name, h.name)
		}
	}
}

// usesVar reports whether a container's env values, command or args, or
// its script, reference variable name.
func usesVar(c *container, name, script string) bool {
	var ref = "$(" + name + ")"
	for _, e := range c.Env {
		if strings.Contains(e.Value, ref) {
			return true
		}
	}
	for _, a := range slices.Concat(c.Command, c.Args) {
		if strings.Contains(a, ref) {
			return true
		}
	}
	return regexp.MustCompile(`\$\{?` + name + `\b`).MatchString(script)
}

// checkMountedFiles checks that the files that flags name (certificates,
// keys, CAs, specs) are keys of Secrets or ConfigMaps mounted there.
func (c *checker) checkMountedFiles(cr containerRef) {
	var h, r = c.helpOf(cr)
	if h == nil || path.Base(r.binary) == "gazette" {
		return
	}
	for flag := range h.flags {
		if !strings.HasSuffix(flag, "-file") && flag != "specs" {
			continue
		}
		var s = c.settingOf(cr, h, r, flag)
		if !s.set || s.ref || s.value == "" || s.value == "-" {
			continue
		}
		c.checkMountedFile(cr, s.field, s.value)
	}
}

func (c *checker) checkMountedFile(cr containerRef, field, file string) {
	var d = cr.w.doc
	for _, vm := range cr.c.VolumeMounts {
		var rel, err = filepath.Rel(vm.MountPath, file)
		if err != nil || strings.HasPrefix(rel, "..") || vm.SubPath != "" {
			continue
		}
		var i = slices.IndexFunc(cr.w.pod().Volumes, func(v volume) bool { return v.Name == vm.Name })
		if i < 0 {
			c.fail(d, cr.field+".volumeMounts["+vm.Name+"]", "no volume %s", vm.Name)
			return
		}
		var v = cr.w.pod().Volumes[i]
		var items []keyToPath
		var keys []string
		switch {
		case v.Secret != nil:
			items, keys = v.Secret.Items, c.secretKeys(d, v.Secret.SecretName)
		case v.ConfigMap != nil:
			items = v.ConfigMap.Items
			if cm := c.m.configMaps[d.Metadata.Namespace+"/"+v.ConfigMap.Name]; cm != nil {
				for k := range cm.Data {
					keys = append(keys, k)
				}
			}
		default:
			c.fail(d, field, "%s is on volume %s, which is neither a Secret nor a ConfigMap", file, vm.Name)
			return
		}
		var key = rel
		if items != nil {
			var j = slices.IndexFunc(items, func(it keyToPath) bool { return it.Path == rel })
			if j < 0 {
				c.fail(d, field, "%s: volume %s projects no item at %s", file, vm.Name, rel)
				return
			}
			key = items[j].Key
		}
		if !slices.Contains(keys, key) {
			c.fail(d, field, "%s: the Secret or ConfigMap of volume %s has no key %q (it has %v)", file, vm.Name, key, keys)
		}
		return
	}
	c.fail(d, field, "%s is on no volume mounted in the container", file)
}

// secretKeys are the keys of a Secret, rendered or created by the operator.
func (c *checker) secretKeys(d *document, name string) []string {
	if s := c.m.secrets[d.Metadata.Namespace+"/"+name]; s != nil {
		var keys []string
		for k := range s.Data {
			keys = append(keys, k)
		}
		return keys
	}
	return operatorSecrets[name]
}

// checkReferences checks that the Secrets and ConfigMaps that pods
// reference exist, with the keys they name: ConfigMaps among the rendered
// objects, Secrets there or among those the operator creates, which
// docs/deploy.md must say how to create.
func (c *checker) checkReferences() {
	var docs, err = os.ReadFile(filepath.Join(c.root, "docs", "deploy.md"))
	if err != nil {
		c.t.Fatal(err)
	}
	var documented = map[string]bool{}
	var checkSecret = func(d *document, field, name, key string, optional bool) {
		c.t.Helper()
		if c.m.secrets[d.Metadata.Namespace+"/"+name] == nil {
			if optional {
				return
			}
			var keys, ok = operatorSecrets[name]
			if !ok {
				c.fail(d, field, "Secret %q is neither rendered nor one the operator creates (docs/deploy.md)", name)
				return
			}
			if !documented[name] {
				documented[name] = true
				if !strings.Contains(string(docs), "secret generic "+name) {
					c.t.Errorf("docs/deploy.md does not show creating Secret %s (kubectl create secret generic %s ...), which %s references", name, name, d)
				}
				for _, k := range keys {
					if !strings.Contains(string(docs), "--from-file="+k+"=") && !strings.Contains(string(docs), "--from-literal="+k+"=") {
						c.t.Errorf("docs/deploy.md does not show creating key %s of Secret %s (--from-file=%s=...)", k, name, k)
					}
				}
			}
		}
		if key != "" && !slices.Contains(c.secretKeys(d, name), key) {
			c.fail(d, field, "Secret %q has no key %q", name, key)
		}
	}
	var checkConfigMap = func(d *document, field, name, key string, optional bool) {
		c.t.Helper()
		var cm = c.m.configMaps[d.Metadata.Namespace+"/"+name]
		if cm == nil {
			if !optional {
				c.fail(d, field, "ConfigMap %q is not among the rendered objects", name)
			}
			return
		}
		if _, ok := cm.Data[key]; key != "" && !ok {
			c.fail(d, field, "ConfigMap %q has no key %q", name, key)
		}
	}

	for _, w := range c.m.workloads {
		var d = w.doc
		for _, v := range w.pod().Volumes {
			var field = "spec.template.spec.volumes[" + v.Name + "]"
			switch {
			case v.Secret != nil:
				checkSecret(d, field+".secret", v.Secret.SecretName, "", v.Secret.Optional)
				for _, it := range v.Secret.Items {
					checkSecret(d, field+".secret.items", v.Secret.SecretName, it.Key, v.Secret.Optional)
				}
			case v.ConfigMap != nil:
				checkConfigMap(d, field+".configMap", v.ConfigMap.Name, "", v.ConfigMap.Optional)
				for _, it := range v.ConfigMap.Items {
					checkConfigMap(d, field+".configMap.items", v.ConfigMap.Name, it.Key, v.ConfigMap.Optional)
				}
			}
		}
		for _, cr := range w.containers() {
			for _, e := range cr.c.Env {
				var field = cr.field + ".env[" + e.Name + "].valueFrom"
				switch {
				case e.ValueFrom == nil:
				case e.ValueFrom.SecretKeyRef != nil:
					var r = e.ValueFrom.SecretKeyRef
					checkSecret(d, field+".secretKeyRef", r.Name, r.Key, r.Optional)
				case e.ValueFrom.ConfigMapKeyRef != nil:
					var r = e.ValueFrom.ConfigMapKeyRef
					checkConfigMap(d, field+".configMapKeyRef", r.Name, r.Key, r.Optional)
				}
			}
			for i, ef := range cr.c.EnvFrom {
				var field = fmt.Sprintf("%s.envFrom[%d]", cr.field, i)
				if ef.SecretRef != nil {
					checkSecret(d, field+".secretRef", ef.SecretRef.Name, "", ef.SecretRef.Optional)
				}
				if ef.ConfigMapRef != nil {
					checkConfigMap(d, field+".configMapRef", ef.ConfigMapRef.Name, "", ef.ConfigMapRef.Optional)
				}
			}
		}
	}
}

// selects returns the workloads of a Service's namespace whose pods its
// selector matches.
func (c *checker) selects(s *service) []*workload {
	var out []*workload
	for _, w := range c.m.workloads {
		if w.doc.Metadata.Namespace != s.doc.Metadata.Namespace || len(s.Spec.Selector) == 0 || w.doc.Kind == "Job" {
			continue
		}
		var match = true
		for k, v := range s.Spec.Selector {
			match = match && w.Spec.Template.Metadata.Labels[k] == v
		}
		if match {
			out = append(out, w)
		}
	}
	return out
}

// checkServices checks that every Service selects pods that serve its
// target ports, and that StatefulSets name a headless Service.
func (c *checker) checkServices() {
	for _, s := range c.m.services {
		var ws = c.selects(s)
		if len(ws) == 0 {
			c.fail(s.doc, "spec.selector", "%v selects no workload's pods", s.Spec.Selector)
		}
		for _, p := range s.Spec.Ports {
			var target = p.TargetPort
			if target == "" {
				target = strconv.Itoa(p.Port)
			}
			for _, w := range ws {
				if !slices.ContainsFunc(w.pod().Containers, func(ct container) bool { _, ok := containerPort(&ct, target); return ok }) {
					c.fail(s.doc, "spec.ports["+p.Name+"].targetPort", "%q is not a port of the containers of %s", target, w.doc)
				}
			}
		}
	}
	for _, w := range c.m.workloads {
		if w.doc.Kind != "StatefulSet" {
			continue
		}
		var s = c.service(w.doc.Metadata.Namespace, w.Spec.ServiceName)
		switch {
		case s == nil:
			c.fail(w.doc, "spec.serviceName", "names Service %q, which is not among the rendered objects", w.Spec.ServiceName)
		case s.Spec.ClusterIP != "None":
			c.fail(w.doc, "spec.serviceName", "names Service %q, which is not headless (clusterIP: None)", w.Spec.ServiceName)
		}
	}
}

func (c *checker) service(namespace, name string) *service {
	for _, s := range c.m.services {
		if s.doc.Metadata.Namespace == namespace && s.doc.Metadata.Name == name {
			return s
		}
	}
	return nil
}

// checkAddresses checks that the etcd, broker and member addresses of
// consumers and gazctl name rendered Services and their ports, and that a
// member address is https:// if the members serve TLS.
func (c *checker) checkAddresses(cr containerRef) {
	var h, r = c.helpOf(cr)
	if h == nil || path.Base(r.binary) == "gazette" {
		return
	}
	var d = cr.w.doc
	// The addresses a command needs: a member's, etcd's and the brokers';
	// gazctl's, those of the service its subcommand calls.
	var required = []string{"etcd.address", "broker.address"}
	if path.Base(r.binary) == "gazctl" {
		required = []string{map[string]string{"journals": "broker.address", "shards": "consumer.address"}[r.sub[0]]}
	}
	for _, flag := range []string{"etcd.address", "broker.address", "consumer.address"} {
		if _, ok := h.flags[flag]; !ok {
			continue
		}
		var s = c.settingOf(cr, h, r, flag)
		if !s.set && slices.Contains(required, flag) {
			c.fail(d, s.field, "not set: its default %q reaches no Service of the deployment", s.value)
			continue
		} else if !s.set {
			continue
		}
		for _, addr := range strings.Split(s.value, ",") {
			var u, err = url.Parse(strings.TrimSpace(addr))
			if err != nil || u.Hostname() == "" || u.Port() == "" {
				c.fail(d, s.field, "%q is not a URL with a host and port", addr)
				continue
			}
			var name, _, _ = strings.Cut(u.Hostname(), ".")
			var svc = c.service(d.Metadata.Namespace, name)
			if svc == nil {
				c.fail(d, s.field, "%q: there is no Service %q", addr, name)
				continue
			}
			if !slices.ContainsFunc(svc.Spec.Ports, func(p servicePort) bool { return strconv.Itoa(p.Port) == u.Port() }) {
				c.fail(d, s.field, "%q: Service %s has no port %s", addr, svc.doc, u.Port())
			}
			for _, w := range c.selects(svc) {
				for _, mc := range w.containers() {
					if !isConsumer(mc) {
						continue
					}
					var mh, mr = c.helpOf(mc)
					var tlsOn = c.settingOf(mc, mh, mr, "consumer.server-cert-file").value != ""
					if want := map[bool]string{true: "https", false: "http"}[tlsOn]; u.Scheme != want {
						c.fail(d, s.field, "%q: the members of %s serve %s", addr, w.doc, want)
					}
				}
			}
		}
	}
}

// checkDockerfile checks that deploy/Dockerfile builds what the manifests
// run: the consumer at /usr/local/bin/consumer as its entrypoint, gazctl on
// the PATH, the port the members serve, and the user pods run as.
func (c *checker) checkDockerfile() {
	var data, err = os.ReadFile(filepath.Join(c.root, "deploy", "Dockerfile"))
	if err != nil {
		c.t.Fatal(err)
	}
	var text = string(data)
	if !regexp.MustCompile(`(?m)^ENTRYPOINT \["` + regexp.QuoteMeta(consumerBinary) + `"\]`).MatchString(text) {
		c.t.Errorf("deploy/Dockerfile: ENTRYPOINT is not [%q], the consumer the manifests run", consumerBinary)
	}
	if !regexp.MustCompile(`(?m)^COPY --from=builder .*\bgazctl\b.* /usr/local/bin/$`).MatchString(text) {
		c.t.Errorf("deploy/Dockerfile: gazctl, which the Jobs run, is not copied into /usr/local/bin")
	}
	var exposed = regexp.MustCompile(`(?m)^EXPOSE\s+(.*)$`).FindAllStringSubmatch(text, -1)
	var user = regexp.MustCompile(`(?m)^USER\s+(\d+)`).FindStringSubmatch(text)
	c.forContainers(func(cr containerRef) {
		var h, r = c.helpOf(cr)
		if h == nil || !(isConsumer(cr) || path.Base(r.binary) == "gazctl") {
			return
		}
		if isConsumer(cr) {
			var port = c.settingOf(cr, h, r, "consumer.port").value
			if !slices.ContainsFunc(exposed, func(m []string) bool { return slices.Contains(strings.Fields(m[1]), port) }) {
				c.fail(cr.w.doc, cr.field+".ports", "the member's port %s is not EXPOSEd by deploy/Dockerfile", port)
			}
		}
		if uid := cr.w.pod().SecurityContext.RunAsUser; uid != nil && (user == nil || user[1] != strconv.FormatInt(*uid, 10)) {
			c.fail(cr.w.doc, "spec.template.spec.securityContext.runAsUser", "%d is not deploy/Dockerfile's USER %v", *uid, user)
		}
	})
}
