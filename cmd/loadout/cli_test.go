package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"loadout/chat/chattest"
)

// cli runs the command line with no config file anywhere ($LOADOUT_CONFIG
// names a file that does not exist), so help that needed one would fail.
func cliRun(t *testing.T, stdin string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errOut bytes.Buffer
	missing := filepath.Join(t.TempDir(), "absent.yaml")
	err = run(context.Background(), args, strings.NewReader(stdin), &out, &errOut,
		env(map[string]string{"LOADOUT_CONFIG": missing, "TEST_KEY": "sk-test"}))
	return out.String(), errOut.String(), err
}

func TestHelpNeedsNoConfig(t *testing.T) {
	for _, args := range [][]string{
		{"help"}, {"-h"}, {"--help"}, {"-help"},
		{"serve", "-h"}, {"serve", "--help"}, {"chat", "-h"}, {"tools", "-h"},
		{"google", "login", "-h"}, {"help", "serve"}, {"help", "google", "login"},
		{"-config", "x.yaml", "tools", "--help"},
	} {
		out, errOut, err := cliRun(t, "", args...)
		if err != nil || !strings.Contains(out, "Usage:") || errOut != "" {
			t.Errorf("%q: err=%v stdout=%q stderr=%q", args, err, out, errOut)
		}
	}
	out, _, _ := cliRun(t, "", "google", "login", "-h")
	if !strings.Contains(out, "-user") || !strings.Contains(out, "-config") {
		t.Errorf("google login help lacks its flags:\n%s", out)
	}
}

func TestBadCommandLinesAreRefused(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "no command"},
		{[]string{"frobnicate"}, `unknown command "frobnicate"`},
		{[]string{"serve", "now"}, `unexpected argument "now"`},
		{[]string{"tools", "--verbose"}, "flag provided but not defined: -verbose"},
		{[]string{"chat", "-config"}, "flag needs an argument"},
		{[]string{"google"}, `unknown command "google"`},
		{[]string{"google", "logout"}, `unknown command "google logout"`},
		{[]string{"help", "nope"}, `unknown command "nope"`},
		{[]string{"--bogus", "serve"}, "flag provided but not defined: -bogus"},
	} {
		out, errOut, err := cliRun(t, "", tc.args...)
		if !errors.As(err, new(errUsage)) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: err = %v, want a usage error with %q", tc.args, err, tc.want)
		}
		if out != "" || !strings.Contains(errOut, "Usage:") {
			t.Errorf("%q: stdout=%q stderr=%q; want the usage on stderr only", tc.args, out, errOut)
		}
	}
}

func TestConfigFlagAfterTheCommand(t *testing.T) {
	model := chattest.NewModelServer(t)
	cfgPath, _ := writeConfig(t, model.URL, "")
	model.Text("from the right model")
	out, _, err := cliRun(t, "hi\n", "chat", "-config", cfgPath)
	if err != nil || !strings.Contains(out, "from the right model") || len(model.Requests()) != 1 {
		t.Fatalf("chat -config: %v, %d requests\n%s", err, len(model.Requests()), out)
	}
	// Given twice, the one after the command wins.
	model.Text("again")
	out, _, err = cliRun(t, "hi\n", "-config", filepath.Join(t.TempDir(), "nope.yaml"), "chat", "--config="+cfgPath)
	if err != nil || !strings.Contains(out, "again") {
		t.Fatalf("chat --config=: %v\n%s", err, out)
	}
	// Without a usable file the error names it.
	_, _, err = cliRun(t, "", "tools")
	if err == nil || !strings.Contains(err.Error(), "absent.yaml") {
		t.Fatalf("missing config: %v", err)
	}
}

func TestGoogleLoginNeedsUser(t *testing.T) {
	cfgPath, _ := writeConfig(t, "http://127.0.0.1:1/v1", "")
	_, _, err := cliRun(t, "", "google", "login", "-config", cfgPath)
	if !errors.As(err, new(errUsage)) || !strings.Contains(err.Error(), "-user") {
		t.Fatalf("err = %v", err)
	}
}

func TestStartupLineNamesWhatIsUsedAndNoSecret(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "h.yaml")
	cfg := "llm:\n  base_url: http://user:hunter2@127.0.0.1:1/v1\n  api_key: ${TEST_KEY}\n  model: fake-model\n" +
		"store:\n  path: " + filepath.Join(dir, "x.db") + "\nlog:\n  level: info\n"
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	_, errOut, err := cliRun(t, "", "chat", "-config", path)
	if err != nil {
		t.Fatal(err)
	}
	line := ""
	for _, l := range strings.Split(errOut, "\n") {
		if strings.Contains(l, "loadout starting") {
			line = l
		}
	}
	for _, want := range []string{"config=" + path, "model=fake-model", "llm_host=127.0.0.1:1", "channels=console", "level=INFO"} {
		if !strings.Contains(line, want) {
			t.Errorf("startup line lacks %q: %q", want, line)
		}
	}
	for _, secret := range []string{"sk-test", "hunter2", "user:"} {
		if strings.Contains(errOut, secret) {
			t.Errorf("log shows %q:\n%s", secret, errOut)
		}
	}
}

func TestNoConfigFileRunsFromTheEnvironment(t *testing.T) {
	model := chattest.NewModelServer(t)
	model.Text("from env alone")
	t.Chdir(t.TempDir()) // no ./config.yaml here
	var out bytes.Buffer
	err := run(context.Background(), []string{"chat"}, strings.NewReader("hi\n"), &out, &out, env(map[string]string{
		"LOADOUT_LLM_BASE_URL": model.URL, "LOADOUT_STORE_PATH": filepath.Join(t.TempDir(), "x.db"), "LOADOUT_LOG_LEVEL": "info",
	}))
	if err != nil || !strings.Contains(out.String(), "from env alone") || !strings.Contains(out.String(), "config=\"(none") {
		t.Fatalf("chat without a config file: %v\n%s", err, out.String())
	}
}

// A binary built without cgo cannot open SQLite; it says so plainly at
// start instead of failing on store.path.
func TestBuildWithoutCgoSaysSo(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := filepath.Join(t.TempDir(), "loadout")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build without cgo: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "tools")
	cmd.Dir = t.TempDir()
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "this build has no SQLite support: build with CGO_ENABLED=1") || strings.Contains(string(out), "store.path") {
		t.Fatalf("err = %v, output:\n%s", err, out)
	}
	// Help still works.
	if out, err := exec.Command(bin, "help").CombinedOutput(); err != nil || !strings.Contains(string(out), "Usage:") {
		t.Fatalf("help without cgo: %v\n%s", err, out)
	}
}

// No collection runs while the packages initialise (startgc): the
// libraries linked allocate about 3 MB there, past the runtime's first
// target (4 MB, started from about 3 MB), and a collection in their
// midst left its work and metadata to every process. startgc must hold
// the collector back before the first 2 MB are allocated, whatever the
// order the linker gives the packages. The process is this test binary
// run as loadout (its test packages allocate more still).
func TestNoCollectionWhilePackagesInitialise(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "LOADOUT_TEST_MAIN=help", "GODEBUG=inittrace=1,gctrace=1", "GOGC=")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("loadout help: %v\n%s", err, out)
	}
	var allocated, before int
	held, inits := false, 0
	for _, l := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(l, "gc ") && inits < 100 {
			t.Errorf("a collection ran while packages initialised: %s", l)
		}
		f := strings.Fields(l)
		if len(f) < 8 || f[0] != "init" {
			continue
		}
		inits++
		if f[1] == "loadout/internal/startgc" {
			held, before = true, allocated
		}
		n, err := strconv.Atoi(f[7])
		if err != nil {
			t.Fatalf("inittrace line %q", l)
		}
		allocated += n
	}
	switch {
	case inits < 100:
		t.Fatalf("no package initialisation traced:\n%s", out)
	case !held:
		t.Fatal("startgc was not initialised")
	case before > 2<<20 || allocated-before < 1<<20:
		t.Errorf("startgc held the collector back after %d of the %d bytes initialisation allocates", before, allocated)
	}
	t.Logf("startgc held the collector back after %d of the %d bytes initialisation allocates", before, allocated)
}

// serve is found wherever -config stands; every other command line lets
// the collector go at once.
func TestServingFindsServe(t *testing.T) {
	for args, want := range map[string]bool{
		"serve": true, "-config x.yaml serve": true, "-config=x.yaml serve": true, "serve -config x.yaml": true,
		"": false, "chat": false, "-config serve chat": false, "help serve": false, "tools": false,
	} {
		if got := serving(strings.Fields(args)); got != want {
			t.Errorf("serving(%q) = %v, want %v", args, got, want)
		}
	}
}
