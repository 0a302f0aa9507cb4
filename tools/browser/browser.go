// Package browser gives the model a browser of its own: Debian's
// chromium, headless, driven through chromedp, for pages drawn by
// script, forms and screenshots. It is confined like exec: chromium runs
// under the kill-on-death keeper (package proc), as nobody when loadout
// runs as root, with its sandbox on where the kernel allows, and every
// request it makes goes through a proxy inside loadout that checks it
// with the web tools' guard (web.allow_hosts), at dial time. One
// browser per chat, with its own profile, deleted when the chat closes
// it, clears, or leaves it idle.
package browser

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"loadout/config"
	"loadout/proc"
	"loadout/tools"
	"loadout/tools/guard"
)

// Config configures the browser group (the browser section). The zero
// value is the documented defaults, with the group off.
type Config struct {
	// Enabled adds the browser group (browser.enabled); default off.
	Enabled bool `yaml:"enabled"`
	// Idle is how long a chat's browser lives after its last use
	// (browser.idle); default 10m.
	Idle time.Duration `yaml:"idle"`
	// MaxBrowsers bounds the browsers running at once in the process
	// (browser.max_browsers), one per chat using one; default 2. A chat
	// that finds none free waits within its call's time.
	MaxBrowsers int `yaml:"max_browsers"`
	// PageTimeout bounds loading a page and each action
	// (browser.page_timeout); default 20s.
	PageTimeout time.Duration `yaml:"page_timeout"`
	// MaxText caps the page text one call returns, in characters
	// (browser.max_text); default 12000.
	MaxText int `yaml:"max_text"`
	// MaxElements caps the numbered elements listed (browser.max_elements);
	// default 150.
	MaxElements int `yaml:"max_elements"`
	// MemoryMB caps the JavaScript heap of each page's renderer, in MB
	// (browser.memory_mb); default 512. A page that needs more crashes,
	// and the call says so.
	MemoryMB int `yaml:"memory_mb"`
	// Path is chromium's binary (browser.path); default the chromium,
	// chromium-browser or google-chrome found on PATH.
	Path string `yaml:"path"`
	// Dir holds the chats' profiles (browser.dir); default a folder
	// under the system's temporary directory. Each profile is deleted
	// when its browser ends.
	Dir string `yaml:"dir"`
	// NoSandbox turns chromium's own sandbox off (browser.no_sandbox).
	// Default on where the kernel allows: where it cannot (no user
	// namespaces, as in a container under the default seccomp profile),
	// chromium is started without it and a warning is logged.
	NoSandbox bool `yaml:"no_sandbox"`
	// Slots bound the browsers at once; default MaxBrowsers of them.
	Slots *proc.Slots `yaml:"-"`
	// keepUser runs chromium as loadout's own user even as root: the
	// benchmark's way to measure without the drop.
	keepUser bool
}

// Check checks the browser section.
func (c Config) Check(ch *config.Checker) {
	ch.Duration("idle", c.Idle, time.Second)
	ch.Duration("page_timeout", c.PageTimeout, time.Second)
	if c.MaxBrowsers < 0 {
		ch.Bad("max_browsers", "must be 1 or more (0: the default, 2), got %d", c.MaxBrowsers)
	}
	if c.MaxText < 0 {
		ch.Bad("max_text", "must be 1 or more characters (0: the default, 12000), got %d", c.MaxText)
	}
	if c.MaxElements < 0 {
		ch.Bad("max_elements", "must be 1 or more (0: the default, 150), got %d", c.MaxElements)
	}
	if c.MemoryMB != 0 && c.MemoryMB < 64 {
		ch.Bad("memory_mb", "must be 64 or more (0: the default, 512), got %d", c.MemoryMB)
	}
}

func (c *Config) setDefaults() error {
	if c.Idle <= 0 {
		c.Idle = 10 * time.Minute
	}
	if c.MaxBrowsers <= 0 {
		c.MaxBrowsers = 2
	}
	if c.PageTimeout <= 0 {
		c.PageTimeout = 20 * time.Second
	}
	if c.MaxText <= 0 {
		c.MaxText = 12000
	}
	if c.MaxElements <= 0 {
		c.MaxElements = 150
	}
	if c.MemoryMB <= 0 {
		c.MemoryMB = 512
	}
	if c.Dir == "" {
		c.Dir = filepath.Join(os.TempDir(), "loadout-browser")
	}
	if c.Slots == nil {
		c.Slots = proc.NewSlots(c.MaxBrowsers)
	}
	return nil
}

// Deps are what the browser takes from the rest of loadout.
type Deps struct {
	// Guard checks every request a page makes; loadout gives the web
	// tools' (web.allow_hosts). Default a guard with no allowlist.
	Guard *guard.Guard
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// Save keeps a screenshot in the calling chat's files and returns
	// the name it got (files.Workspaces.SaveForCaller).
	Save func(ctx context.Context, name string, data []byte) (string, error)
}

// Manager holds the chats' browsers. Safe for concurrent use.
type Manager struct {
	cfg  Config
	deps Deps
	path string
	log  *slog.Logger

	// unsandboxed is set once chromium is started without its sandbox:
	// browser.no_sandbox, or the kernel refused it.
	unsandboxed atomic.Bool

	mu       sync.Mutex
	sessions map[string]*session
	// profiles is this process's folder of profiles, made at the first
	// launch.
	profiles string
}

// New returns a manager; nothing starts until a chat opens a page.
func New(cfg Config, deps Deps) (*Manager, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	if deps.Guard == nil {
		g, err := guard.New(guard.Config{})
		if err != nil {
			return nil, err
		}
		deps.Guard = g
	}
	if deps.Logger == nil {
		deps.Logger = slog.Default()
	}
	path := cfg.Path
	if path == "" {
		path = Find()
	}
	m := &Manager{cfg: cfg, deps: deps, path: path, log: deps.Logger, sessions: map[string]*session{}}
	m.unsandboxed.Store(cfg.NoSandbox)
	return m, nil
}

// Available reports whether chromium is installed.
func (m *Manager) Available() bool {
	if m.path == "" {
		return false
	}
	_, err := os.Stat(m.path)
	return err == nil
}

// missing is what the group says without chromium.
const missing = "chromium is not installed on loadout's machine: install it (apt-get install chromium), or set browser.path"

// session is one chat's browser.
type session struct {
	chat string
	// mu lets one call act at a time.
	mu    sync.Mutex
	inst  *instance
	dir   string
	timer *time.Timer
	nav   *navWatch
	ended bool
	// used is when the last call let go of it.
	used time.Time
}

// Running is how many chats have a browser now.
func (m *Manager) Running() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.sessions)
}

// Profile is the folder of chatKey's browser profile, "" when it has no
// browser.
func (m *Manager) Profile(chatKey string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if s := m.sessions[chatKey]; s != nil {
		return s.dir
	}
	return ""
}

// Pid is the process id of chatKey's browser's keeper, 0 when it has
// none.
func (m *Manager) Pid(chatKey string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	if s := m.sessions[chatKey]; s != nil && s.inst.cmd.Process != nil {
		return s.inst.cmd.Process.Pid
	}
	return 0
}

// session returns chatKey's browser, locked, starting one when start is
// set; nil with no error when there is none and start is not set.
func (m *Manager) session(ctx context.Context, chatKey string, start bool) (*session, error) {
	m.mu.Lock()
	s := m.sessions[chatKey]
	m.mu.Unlock()
	if s != nil {
		s.mu.Lock()
		if !s.ended {
			return s, nil
		}
		s.mu.Unlock()
	}
	if !start {
		return nil, nil
	}
	if !m.Available() {
		return nil, &tools.Error{Code: tools.CodeUnavailable, Message: missing}
	}
	wait, cancel := context.WithTimeout(ctx, m.cfg.PageTimeout)
	err := m.cfg.Slots.Take(wait)
	cancel()
	if err != nil {
		return nil, &tools.Error{Code: tools.CodeUnavailable,
			Message:    fmt.Sprintf("%d browsers are open in other chats (browser.max_browsers); none came free in time", m.cfg.Slots.Max()),
			Suggestion: "try again in a few minutes"}
	}
	s, err = m.start(chatKey)
	if err != nil {
		m.cfg.Slots.Give()
		return nil, err
	}
	s.mu.Lock()
	m.mu.Lock()
	if old := m.sessions[chatKey]; old != nil {
		// Another call of the chat started one meanwhile: keep that.
		m.mu.Unlock()
		s.mu.Unlock()
		m.end(s)
		return m.session(ctx, chatKey, false)
	}
	m.sessions[chatKey] = s
	m.mu.Unlock()
	return s, nil
}

// start launches a browser with a new profile.
func (m *Manager) start(chatKey string) (*session, error) {
	m.mu.Lock()
	if m.profiles == "" {
		if err := os.MkdirAll(m.cfg.Dir, 0o711); err != nil {
			m.mu.Unlock()
			return nil, fmt.Errorf("browser.dir: %w", err)
		}
		run, err := os.MkdirTemp(m.cfg.Dir, "run-")
		if err != nil {
			m.mu.Unlock()
			return nil, fmt.Errorf("browser.dir: %w", err)
		}
		os.Chmod(run, 0o711)
		m.profiles = run
	}
	run := m.profiles
	m.mu.Unlock()
	var rnd [6]byte
	rand.Read(rnd[:])
	dir := filepath.Join(run, "chat-"+hex.EncodeToString(rnd[:]))
	if err := os.Mkdir(dir, 0o700); err != nil {
		return nil, err
	}
	inst, err := m.launch(dir)
	if err != nil && !m.unsandboxed.Load() && strings.Contains(strings.ToLower(err.Error()), "sandbox") {
		if m.unsandboxed.CompareAndSwap(false, true) {
			m.log.Warn("browser: chromium's sandbox is not available on this kernel (no user namespaces); running chromium without it, as an unprivileged user. Set browser.no_sandbox: true to say so up front.", "err", err)
		}
		inst, err = m.launch(dir)
	}
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	s := &session{chat: chatKey, inst: inst, dir: dir, used: time.Now()}
	s.nav = watch(inst.tab)
	s.timer = time.AfterFunc(m.cfg.Idle, func() { m.expire(s) })
	return s, nil
}

// release unlocks s after a call and restarts its idle clock.
func (m *Manager) release(s *session) {
	if !s.ended {
		s.used = time.Now()
		s.timer.Reset(m.cfg.Idle)
	}
	s.mu.Unlock()
}

// expire ends s once it has been idle for browser.idle; a call that held
// it as the timer fired has set the timer again.
func (m *Manager) expire(s *session) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if time.Since(s.used) < m.cfg.Idle {
		return
	}
	m.endLocked(s)
}

// end ends s, waiting for a call of it to finish.
func (m *Manager) end(s *session) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m.endLocked(s)
}

// endLocked ends s, held by the caller: chromium and its proxy stop,
// its profile is deleted, its place is given back.
func (m *Manager) endLocked(s *session) {
	if s.ended {
		return
	}
	s.ended = true
	s.timer.Stop()
	s.inst.close()
	if err := os.RemoveAll(s.dir); err != nil {
		m.log.Warn("browser: a profile was not deleted", "dir", s.dir, "err", err)
	}
	m.mu.Lock()
	if m.sessions[s.chat] == s {
		delete(m.sessions, s.chat)
	}
	m.mu.Unlock()
	m.cfg.Slots.Give()
}

// Clear ends chatKey's browser and deletes its profile: the chat was
// cleared (/clear). It waits for a call of the chat's browser to end. A
// nil Manager (the group off) has nothing to clear.
func (m *Manager) Clear(_ context.Context, chatKey string) {
	if m == nil {
		return
	}
	m.mu.Lock()
	s := m.sessions[chatKey]
	m.mu.Unlock()
	if s != nil {
		m.end(s)
	}
}

// Close ends every browser; for loadout's shutdown. A nil Manager has
// none.
func (m *Manager) Close() {
	if m == nil {
		return
	}
	m.mu.Lock()
	all := make([]*session, 0, len(m.sessions))
	for _, s := range m.sessions {
		all = append(all, s)
	}
	run := m.profiles
	m.mu.Unlock()
	for _, s := range all {
		m.end(s)
	}
	if run != "" {
		os.RemoveAll(run)
	}
}

// Register adds the browser group when browser.enabled. Without chromium
// the group is listed all the same, saying what to install, and loading
// it says so. It returns the manager (nil when the group is off), whose
// Clear the chat's /clear calls.
func Register(reg *tools.Registry, cfg Config, deps Deps) (*Manager, error) {
	if !cfg.Enabled {
		return nil, nil
	}
	m, err := New(cfg, deps)
	if err != nil {
		return nil, err
	}
	g := tools.Group{Name: "browser", DisplayName: "Browser",
		Description: "A web browser of the chat's own for pages that need JavaScript: open, click, type into forms, screenshots"}
	if !m.Available() {
		g.Description += " (unavailable: " + missing + ")"
		g.Prepare = func(context.Context) error {
			return &tools.Error{Code: tools.CodeUnavailable, Message: missing}
		}
	}
	return m, reg.AddGroup(g, m.Tool())
}

// errGone is an action on a browser that ended meanwhile.
var errGone = errors.New("browser: the chat's browser has ended")
