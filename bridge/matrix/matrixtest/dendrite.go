// Package matrixtest runs a real Matrix homeserver, Dendrite, for the
// Matrix channel's tests, and the people who talk to the bot there: each
// a mautrix client of their own, with end-to-end encryption in builds
// with the goolm tag.
//
// The Dendrite binaries (dendrite, generate-keys, create-account, all
// v0.13.8) are looked for in the directory $LOADOUT_TEST_DENDRITE names,
// else on PATH; without them the tests that need a homeserver skip,
// saying how to build them.
package matrixtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// DirVar names the environment variable of the directory holding the
// Dendrite binaries.
const DirVar = "LOADOUT_TEST_DENDRITE"

// Version is the Dendrite release the tests run.
const Version = "v0.13.8"

// HowToGet says how to build the binaries.
const HowToGet = "build them with: GOBIN=$DIR go install github.com/matrix-org/dendrite/cmd/dendrite@" + Version +
	" github.com/matrix-org/dendrite/cmd/generate-keys@" + Version + " github.com/matrix-org/dendrite/cmd/create-account@" + Version +
	" and set " + DirVar + "=$DIR (.ci/run does this)"

// binaries finds the three binaries; an error says which is missing.
func binaries() (map[string]string, error) {
	out := map[string]string{}
	for _, name := range []string{"dendrite", "generate-keys", "create-account"} {
		if dir := os.Getenv(DirVar); dir != "" {
			p := filepath.Join(dir, name)
			if st, err := os.Stat(p); err == nil && !st.IsDir() {
				out[name] = p
				continue
			}
		}
		p, err := exec.LookPath(name)
		if err != nil {
			return nil, fmt.Errorf("dendrite's %s is not in $%s nor on PATH", name, DirVar)
		}
		out[name] = p
	}
	return out, nil
}

// Server is a running Dendrite on 127.0.0.1, with SQLite, no
// federation, no rate limits, and registration by shared secret only.
type Server struct {
	// URL is its client-server API.
	URL string
	// Name is its server name: user ids end in ":" + Name.
	Name string

	dir, config string
	bins        map[string]string
	cmd         *exec.Cmd
	exited      chan struct{}
	log         *bytes.Buffer

	mu       sync.Mutex
	accounts map[string]bool
}

// Shared starts one Server for many tests: the first call starts it,
// later ones return it; Close stops it. The zero value is ready.
type Shared struct {
	once sync.Once
	s    *Server
	err  error
	dir  string
}

// Get returns the shared server, starting it on the first call; t
// skips when the binaries are missing and fails when it cannot start.
func (sh *Shared) Get(t testing.TB) *Server {
	t.Helper()
	sh.once.Do(func() {
		sh.dir, sh.err = os.MkdirTemp("", "dendrite-")
		if sh.err == nil {
			sh.s, sh.err = Start(sh.dir)
		}
	})
	if sh.err != nil {
		if errors.Is(sh.err, errNoBinaries) {
			t.Skipf("no Dendrite to test against: %v; %s", sh.err, HowToGet)
		}
		t.Fatalf("dendrite: %v", sh.err)
	}
	return sh.s
}

// Close stops the shared server and removes its files.
func (sh *Shared) Close() {
	if sh.s != nil {
		sh.s.Close()
	}
	if sh.dir != "" {
		os.RemoveAll(sh.dir)
	}
}

var errNoBinaries = errors.New("dendrite binaries missing")

// sharedSecret registers accounts.
const sharedSecret = "loadout-test-registration"

// Start runs Dendrite with its files in dir, and returns once it
// answers.
func Start(dir string) (*Server, error) {
	bins, err := binaries()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errNoBinaries, err)
	}
	key := filepath.Join(dir, "matrix_key.pem")
	if out, err := exec.Command(bins["generate-keys"], "--private-key", key).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("generate-keys: %v: %s", err, out)
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	s := &Server{URL: fmt.Sprintf("http://127.0.0.1:%d", port), Name: "localhost", dir: dir, bins: bins,
		config: filepath.Join(dir, "dendrite.yaml"), exited: make(chan struct{}), log: &bytes.Buffer{}, accounts: map[string]bool{}}
	if err := os.WriteFile(s.config, []byte(config(dir, key)), 0o600); err != nil {
		return nil, err
	}
	s.cmd = exec.Command(bins["dendrite"], "--config", s.config, "--http-bind-address", fmt.Sprintf("127.0.0.1:%d", port))
	s.cmd.Dir = dir
	out := &lockedWriter{w: s.log}
	s.cmd.Stdout, s.cmd.Stderr = out, out
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start dendrite: %w", err)
	}
	go func() { s.cmd.Wait(); close(s.exited) }()
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get(s.URL + "/_matrix/client/versions")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return s, nil
			}
		}
		select {
		case <-s.exited:
			return nil, fmt.Errorf("dendrite exited: %s", s.Log())
		default:
		}
		if time.Now().After(deadline) {
			s.Close()
			return nil, fmt.Errorf("dendrite did not answer within a minute: %s", s.Log())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Close stops the server.
func (s *Server) Close() {
	s.cmd.Process.Kill()
	<-s.exited
}

// Log is what Dendrite wrote.
func (s *Server) Log() string {
	lw := s.cmd.Stderr.(*lockedWriter)
	lw.mu.Lock()
	defer lw.mu.Unlock()
	return s.log.String()
}

// Account makes the account localpart with password, once (later calls
// for the same localpart do nothing), and returns its user id.
func (s *Server) Account(t testing.TB, localpart, password string) string {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	uid := "@" + localpart + ":" + s.Name
	if s.accounts[localpart] {
		return uid
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, s.bins["create-account"], "-config", s.config, "-url", s.URL,
		"-username", localpart, "-password", password).CombinedOutput()
	if err != nil {
		t.Fatalf("create-account %s: %v: %s", localpart, err, out)
	}
	s.accounts[localpart] = true
	return uid
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

type lockedWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.w.Len() > 1<<20 {
		l.w.Reset()
	}
	return l.w.Write(p)
}

// config is a Dendrite configuration for tests: every component's
// SQLite file in dir, JetStream in memory, no federation, no rate
// limits, registration by shared secret.
func config(dir, key string) string {
	db := func(name string) string {
		return fmt.Sprintf("\n  database:\n    connection_string: file:%s\n", filepath.Join(dir, name+".db"))
	}
	return strings.TrimSpace(fmt.Sprintf(`
version: 2
global:
  server_name: localhost
  private_key: %[1]s
  key_validity_period: 168h0m0s
  disable_federation: true
  trusted_third_party_id_servers: []
  presence:
    enable_inbound: false
    enable_outbound: false
  report_stats:
    enabled: false
  jetstream:
    in_memory: true
    storage_path: %[2]s
  cache:
    max_size_estimated: 64mb
    max_age: 1h
client_api:
  registration_disabled: true
  guests_disabled: true
  registration_shared_secret: %[3]s
  rate_limiting:
    enabled: false
federation_api:%[4]s  key_perspectives: []
key_server:%[5]s
media_api:%[6]s  base_path: %[2]s/media
  max_file_size_bytes: 10485760
mscs:%[7]s  mscs: []
relay_api:%[8]s
room_server:%[9]s
sync_api:%[10]s  search:
    enabled: false
user_api:
  bcrypt_cost: 4
  account_database:
    connection_string: file:%[2]s/userapi.db
logging:
  - type: std
    level: warn
`, key, dir, sharedSecret, db("federationapi"), db("keyserver"), db("mediaapi"), db("mscs"), db("relayapi"), db("roomserver"), db("syncapi"))) + "\n"
}
