package layout

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// module is the module's path; the rules name packages relative to it.
const module = "loadout"

// binary is the package of the program that ships.
const binary = module + "/cmd/loadout"

// A rule forbids the packages it covers to import some others. Only a
// package's own imports count (not its tests'): a test may import
// whatever it needs.
type rule struct {
	// says is the rule as the design states it, for the failure message.
	says string
	// forbids reports whether pkg may not import imp (both relative to
	// the module: "chat/chattest", "store"; standard and other modules'
	// packages keep their path).
	forbids func(pkg, imp string) bool
}

// rules are the arrows the design forbids between the module's packages.
var rules = []rule{
	{
		says: "chat and its subpackages never import bridge, store, google or cmd: the arrows run bridge → chat → tools, and store → chat",
		forbids: func(pkg, imp string) bool {
			return within(pkg, "chat") && (within(imp, "bridge") || within(imp, "store") || within(imp, "google") || within(imp, "cmd"))
		},
	},
	{
		says: "tools and its subpackages never import chat, bridge, store, google or cmd: tools is the bottom of the arrows (chat → tools, google → tools, store → tools)",
		forbids: func(pkg, imp string) bool {
			return within(pkg, "tools") && (within(imp, "chat") || within(imp, "bridge") || within(imp, "store") || within(imp, "google") || within(imp, "cmd"))
		},
	},
	{
		says: "a channel (bridge/<name>) imports bridge, chat and its platform's SDK, never another channel, google or store",
		forbids: func(pkg, imp string) bool {
			ch := channel(pkg)
			if ch == "" {
				return false
			}
			other := channel(imp)
			return (other != "" && other != ch) || within(imp, "google") || within(imp, "store")
		},
	},
	{
		says: "only cmd and store import ui: the console is wired in cmd, and store implements what it consumes (settings, config.yaml's sections, names its section's type and nothing else of it)",
		forbids: func(pkg, imp string) bool {
			return within(imp, "ui") && !within(pkg, "ui") && !within(pkg, "cmd") && !within(pkg, "store") && pkg != "settings"
		},
	},
	{
		says: "only cmd imports settings: config.yaml's sections are read once, by the program, which hands each package its own",
		forbids: func(pkg, imp string) bool {
			return imp == "settings" && !within(pkg, "cmd") && pkg != "settings"
		},
	},
	{
		says: "a Workspace group (google/<service>) imports only google, tools (and its groups) and backoff of the module: one package per Google API, built on the google template",
		forbids: func(pkg, imp string) bool {
			if service(pkg) == "" || !ofModule(imp) {
				return false
			}
			return !within(imp, "google") && !within(imp, "tools") && imp != "backoff" || within(imp, "google") && imp != "google" && service(imp) != service(pkg)
		},
	},
	{
		says: "google/workspace assembles the Workspace groups and holds the chat commands /connect google and /disconnect google, so it alone of google may import bridge, chat and config, never store or ui; only cmd imports it (and settings, for the google section's type)",
		forbids: func(pkg, imp string) bool {
			if within(imp, "google/workspace") {
				return !within(pkg, "google/workspace") && !within(pkg, "cmd") && pkg != "settings"
			}
			return within(pkg, "google/workspace") && (within(imp, "store") || within(imp, "ui"))
		},
	},
}

// service is the Workspace group pkg belongs to ("gmail" for
// google/gmail), or "" when it is not one: google itself, its fakes
// (google/googletest) and google/workspace.
func service(pkg string) string {
	rest, ok := strings.CutPrefix(pkg, "google/")
	if !ok || helper(pkg) {
		return ""
	}
	name, _, _ := strings.Cut(rest, "/")
	if name == "workspace" {
		return ""
	}
	return name
}

// ofModule reports whether imp (relative, as rel gives it) is one of
// the module's packages: standard and other modules' packages keep a
// path with a dot in its first element, or are the standard library's.
func ofModule(imp string) bool {
	first, _, _ := strings.Cut(imp, "/")
	switch first {
	case "backoff", "bridge", "chat", "cluster", "cmd", "config", "google", "httpd", "internal", "logs", "metrics",
		"proc", "settings", "store", "tokens", "tools", "ui", "voice", "worker":
		return true
	}
	return false
}

// within reports whether pkg is dir or one of its subpackages.
func within(pkg, dir string) bool {
	return pkg == dir || strings.HasPrefix(pkg, dir+"/")
}

// channel is the channel pkg belongs to ("telegram" for bridge/telegram
// and its subpackages), or "" when it is not a channel's: bridge itself,
// the conformance suite bridge/bridgetest, and the fakes of a platform
// (bridge/telegram/telegramtest), which tests use beside any channel.
func channel(pkg string) string {
	rest, ok := strings.CutPrefix(pkg, "bridge/")
	if !ok || helper(pkg) {
		return ""
	}
	name, _, _ := strings.Cut(rest, "/")
	if helper(name) {
		return ""
	}
	return name
}

// helper reports whether pkg is a test helper package (chattest,
// bridge/telegram/telegramtest): those are made for tests, import
// testing, and never ship.
func helper(pkg string) bool {
	return strings.HasSuffix(pkg[strings.LastIndex(pkg, "/")+1:], "test")
}

// linkedForTests are packages of other modules that the binary links
// although they import testing, each with the reason it is tolerated. A
// new one fails the test until it is removed or added here with its
// reason.
var linkedForTests = map[string]string{
	// tools' find_tools stems with snowball/english, which imports
	// snowball/romance; romance keeps its own test helpers in a non-test
	// file. Nothing in them runs.
	"github.com/kljensen/snowball/romance": "imported by github.com/kljensen/snowball/english (find_tools' stemmer)",
}

// pkg is what go list says of a package.
type pkg struct {
	ImportPath string
	Imports    []string
	Module     *struct{ Path string }
	Error      *struct{ Err string }
}

// list runs go list -json for patterns, with deps when asked.
func list(t *testing.T, deps bool, patterns ...string) []pkg {
	t.Helper()
	args := []string{"list", "-e", "-json=ImportPath,Imports,Module,Error"}
	if deps {
		args = append(args, "-deps")
	}
	cmd := exec.Command("go", append(args, patterns...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(cmd.Args[1:], " "), err, stderr.Bytes())
	}
	var pkgs []pkg
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p pkg
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("read go list: %v", err)
		}
		if p.Error != nil {
			t.Errorf("go list: %s: %s", p.ImportPath, p.Error.Err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

// rel is path relative to the module, or path itself when it is not the
// module's.
func rel(path string) string {
	if path == module {
		return "."
	}
	if r, ok := strings.CutPrefix(path, module+"/"); ok {
		return r
	}
	return path
}

// graph is the module's packages' own imports, relative to the module.
type graph map[string][]string

// violations lists, sorted, every import in g that a rule forbids, and
// every way the binary (inBinary: the packages it links, with their
// imports) would link the testing package: a package of the module that
// imports testing, a test helper package, or another module's package
// that imports it and is not in linkedForTests.
func violations(g graph, inBinary graph) []string {
	var out []string
	for p, imps := range g {
		for _, imp := range imps {
			for _, r := range rules {
				if r.forbids(p, imp) {
					out = append(out, fmt.Sprintf("%s imports %s: %s", p, imp, r.says))
				}
			}
		}
	}
	const noTesting = "what ships in the binary never imports testing (only test helper packages, …test, do, and nothing in the binary imports them)"
	for p, imps := range inBinary {
		_, ours := g[p]
		switch {
		case ours && helper(p):
			out = append(out, fmt.Sprintf("%s is linked into %s: %s", p, rel(binary), noTesting))
		case !slices.ContainsFunc(imps, isTesting):
		case ours:
			out = append(out, fmt.Sprintf("%s imports testing and is linked into %s: %s", p, rel(binary), noTesting))
		case linkedForTests[p] == "":
			out = append(out, fmt.Sprintf("%s (another module's) imports testing and is linked into %s: %s; drop it, or name it with its reason in linkedForTests", p, rel(binary), noTesting))
		}
	}
	slices.Sort(out)
	return out
}

func isTesting(imp string) bool { return imp == "testing" || strings.HasPrefix(imp, "testing/") }

// The module keeps the import rules of the design.
func TestImportRules(t *testing.T) {
	g := graph{}
	for _, p := range list(t, false, module+"/...") {
		imps := make([]string, len(p.Imports))
		for i, imp := range p.Imports {
			imps[i] = rel(imp)
		}
		g[rel(p.ImportPath)] = imps
	}
	for _, want := range []string{"chat", "tools", "bridge", "bridge/telegram", "store", "cmd/loadout"} {
		if _, ok := g[want]; !ok {
			t.Fatalf("go list did not report %s: the rules would check nothing", want)
		}
	}
	for p := range g {
		if p != "." && !ofModule(p) {
			t.Errorf("%s is the module's, but ofModule does not know its top folder: add it", p)
		}
	}
	inBinary := graph{}
	for _, p := range list(t, true, binary) {
		if p.Module != nil && p.Module.Path == module {
			inBinary[rel(p.ImportPath)] = g[rel(p.ImportPath)]
		} else {
			inBinary[p.ImportPath] = p.Imports
		}
	}
	for _, v := range violations(g, inBinary) {
		t.Error(v)
	}
	for p, why := range linkedForTests {
		if _, ok := inBinary[p]; !ok {
			t.Errorf("linkedForTests names %s (%s), which the binary no longer links: remove it", p, why)
		}
	}
}

// Each rule catches what it is for, and leaves alone what the design
// allows, on a made-up graph.
func TestRulesCatchWrongArrows(t *testing.T) {
	g := graph{
		"chat":                         {"context", "tools"},
		"chat/chattest":                {"chat", "store", "testing"},
		"chat/openai":                  {"chat", "backoff"},
		"tools":                        {"fmt"},
		"tools/history":                {"tools", "chat"},
		"bridge":                       {"chat", "tools"},
		"bridge/bridgetest":            {"bridge", "store/storetest", "testing"},
		"bridge/telegram":              {"bridge", "chat", "bridge/slack", "google"},
		"bridge/telegram/telegramtest": {"testing", "bridge/slack/slacktest"},
		"bridge/slack":                 {"bridge", "store", "bridge/slack/slacktest"},
		"bridge/slack/slacktest":       {"testing"},
		"store":                        {"chat", "bridge", "tools"},
		"store/storetest":              {"store", "chat/chattest", "testing"},
		"metrics":                      {"testing"},
		"cmd/loadout":                  {"store", "bridge/telegram", "google", "ui", "google/workspace"},
		"ui":                           {"chat", "bridge", "tools"},
		"voice":                        {"ui", "chat"},
		"google":                       {"tools", "backoff"},
		"google/gmail":                 {"google", "tools", "tools/pdf", "backoff", "google.golang.org/api/gmail/v1", "chat"},
		"google/drive":                 {"google", "tools", "google/gmail"},
		"google/googletest":            {"google", "tools", "testing"},
		"google/workspace":             {"google", "google/gmail", "bridge", "chat", "config", "tools", "store"},
		"bridge/webui":                 {"bridge", "chat", "google/workspace"},
	}
	inBinary := graph{
		"cmd/loadout":                          g["cmd/loadout"],
		"metrics":                              g["metrics"],
		"bridge/slack/slacktest":               g["bridge/slack/slacktest"],
		"example.com/lib":                      {"testing/fstest"},
		"github.com/kljensen/snowball/romance": {"testing"},
	}
	want := []string{
		"bridge/slack imports store",
		"bridge/slack/slacktest is linked into cmd/loadout",
		"bridge/telegram imports bridge/slack",
		"bridge/telegram imports google",
		"bridge/webui imports google/workspace", // a channel's rule
		"bridge/webui imports google/workspace", // google/workspace's
		"chat/chattest imports store",
		"example.com/lib (another module's) imports testing",
		"google/drive imports google/gmail",
		"google/gmail imports chat",
		"google/workspace imports store",
		"metrics imports testing and is linked into cmd/loadout",
		"tools/history imports chat",
		"voice imports ui",
	}
	got := violations(g, inBinary)
	if len(got) != len(want) {
		t.Fatalf("violations:\n%s\nwant %d, beginning:\n%s", strings.Join(got, "\n"), len(want), strings.Join(want, "\n"))
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("violation %d = %q, want it to begin %q", i, got[i], want[i])
		}
	}
}
