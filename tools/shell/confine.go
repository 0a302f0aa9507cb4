package shell

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Limits bound one command's use of the machine (exec.limits); each is
// a kernel resource limit set in the confined child before the command
// starts, so its own children share it.
type Limits struct {
	// CPU is the processor time a command may use (RLIMIT_CPU); default
	// the exec timeout.
	CPU time.Duration `yaml:"cpu"`
	// MemoryMB bounds its address space (RLIMIT_AS); default 1024.
	MemoryMB int `yaml:"memory_mb"`
	// Processes bounds the processes its user may have (RLIMIT_NPROC);
	// default 128.
	Processes int `yaml:"processes"`
	// FileSizeMB bounds any file it writes (RLIMIT_FSIZE); default 100.
	FileSizeMB int `yaml:"file_size_mb"`
}

func (l *Limits) setDefaults(timeout time.Duration) {
	if l.CPU <= 0 {
		l.CPU = timeout
	}
	if l.MemoryMB <= 0 {
		l.MemoryMB = 1024
	}
	if l.Processes <= 0 {
		l.Processes = 128
	}
	if l.FileSizeMB <= 0 {
		l.FileSizeMB = 100
	}
}

// systemDirs are what commands may read and run: the system's programs,
// libraries and settings, less what is hidden.
var systemDirs = []string{"/usr", "/bin", "/sbin", "/lib", "/lib64", "/lib32", "/libx32", "/etc"}

// devices commands may use.
var devices = []string{"/dev/null", "/dev/zero", "/dev/random", "/dev/urandom", "/dev/full"}

// DefaultHide is what exec.hide starts with: files under the system
// directories that hold credentials.
var DefaultHide = []string{"/etc/shadow", "/etc/gshadow", "/etc/sudoers", "/etc/sudoers.d", "/etc/ssh", "/etc/ssl/private", "/etc/loadout"}

// nobody is the user a command runs as when loadout runs as root: root
// is exempt from the process limit and may undo the rest.
const nobody = 65534

// childEnv carries a spec to the confined child (the loadout binary run
// again); its presence makes the process that child.
const childEnv = "LOADOUT_EXEC_CHILD"

// spec is what the confined child is told to do.
type spec struct {
	Prog string   `json:"prog"`
	Args []string `json:"args"`
	Env  []string `json:"env"`
	// Workspace is the one directory the command may change.
	Workspace string `json:"workspace"`
	// Read are the paths it may read and run (directories or files).
	Read []string `json:"read"`
	// Devices it may read and write.
	Devices []string `json:"devices"`
	// Hide are paths under Read it may not reach.
	Hide    []string `json:"hide"`
	Network bool     `json:"network"`
	Limits  Limits   `json:"limits"`
	// User, when not zero, is the user and group the command runs as.
	User int `json:"user"`
}

// newSpec is the confinement of one command of cfg run in dir.
func newSpec(cfg Config, prog string, args []string, env []string, dir string) spec {
	s := spec{Prog: prog, Args: args, Env: env, Workspace: dir, Network: cfg.Network, Limits: cfg.Limits, Devices: devices}
	s.Read = append(s.Read, systemDirs...)
	if !underAny(prog, systemDirs) {
		s.Read = append(s.Read, prog) // an allowed program elsewhere
	}
	s.Hide = append(append(append(s.Hide, DefaultHide...), cfg.Hide...), cfg.Protect...)
	if os.Geteuid() == 0 && !cfg.keepUser {
		s.User = nobody
	}
	return s
}

// underAny reports whether p is one of dirs or below one.
func underAny(p string, dirs []string) bool {
	for _, d := range dirs {
		if p == d || strings.HasPrefix(p, d+"/") {
			return true
		}
	}
	return false
}

func (s spec) encode() string {
	b, _ := json.Marshal(s)
	return string(b)
}

// RunChild makes this process the confined child when it was started as
// one, and never returns then: it confines itself and becomes the
// command, or reports why it could not on file descriptor 3 and exits.
// main (and a test binary's TestMain) calls it first.
func RunChild() {
	raw, ok := os.LookupEnv(childEnv)
	if !ok {
		return
	}
	report := os.NewFile(3, "report")
	var s spec
	if err := json.Unmarshal([]byte(raw), &s); err != nil {
		fmt.Fprintf(report, "the confinement spec does not parse: %v", err)
		os.Exit(125)
	}
	err := confineAndExec(s, report)
	fmt.Fprint(report, err)
	os.Exit(125)
}

// readable lists the rules' paths: each path of read that exists, or,
// for one with hidden paths below it, its entries (recursively) less
// the hidden ones.
func readable(read, hide []string) (dirs, files []string) {
	var walk func(p string)
	walk = func(p string) {
		if underAny(p, hide) {
			return
		}
		st, err := os.Stat(p)
		if err != nil {
			return // missing, or a broken link
		}
		if !st.IsDir() {
			files = append(files, p)
			return
		}
		inside := false
		for _, h := range hide {
			if strings.HasPrefix(h, p+"/") {
				inside = true
				break
			}
		}
		if !inside {
			dirs = append(dirs, p)
			return
		}
		entries, err := os.ReadDir(p)
		if err != nil {
			return
		}
		for _, e := range entries {
			walk(filepath.Join(p, e.Name()))
		}
	}
	for _, p := range read {
		walk(filepath.Clean(p))
	}
	return dirs, files
}
