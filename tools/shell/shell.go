// Package shell provides the exec tool: it runs the commands an operator
// allows, as argument lists (no shell unless one is allowed), in the
// chat's workspace, with a timeout, a cap on output and a clean
// environment. It is off unless exec.enabled is true.
//
// Each command is confined: the loadout binary is started again as a
// child (RunChild) that restricts itself with Landlock — read-write in
// the chat's workspace alone, read-only on the system's directories less
// exec.hide, no /proc, no network unless exec.network — sets the
// exec.limits resource limits, drops root to nobody, and only then
// becomes the command.
package shell

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"loadout/proc"
	"loadout/tools"
)

// Config configures exec.
type Config struct {
	// Enabled turns the tool on (exec.enabled).
	Enabled bool `yaml:"enabled"`
	// Allow lists the commands that may run (exec.allow): names looked up
	// in Path, or absolute paths. A shell runs only if it is listed.
	Allow []string `yaml:"allow"`
	// Timeout bounds one command (exec.timeout); default 30s.
	Timeout time.Duration `yaml:"timeout"`
	// MaxOutput caps what is returned of stdout and stderr together
	// (exec.max_output, bytes); default 16384.
	MaxOutput int `yaml:"max_output"`
	// Path is the PATH commands see and are found in; default
	// /usr/local/bin:/usr/bin:/bin.
	Path string `yaml:"path"`
	// Network lets commands open TCP connections (exec.network);
	// default off.
	Network bool `yaml:"network"`
	// Hide lists paths under the system directories commands may not
	// read (exec.hide), besides DefaultHide.
	Hide []string `yaml:"hide"`
	// Limits bound each command (exec.limits).
	Limits Limits `yaml:"limits"`
	// MaxRunning is how many commands run at once in the whole process
	// (exec.max_running), whatever the number of calls and chats; the
	// rest wait within their call's timeout. Default the number of CPUs.
	// Commands have places of their own, apart from PDF workers
	// (pdf.max_workers): a command may rightly take its whole timeout,
	// and should not hold up reading a PDF.
	MaxRunning int `yaml:"max_running"`
	// Slots are the places commands take; default MaxRunning of them,
	// made by Tool for all the calls of the tool it returns.
	Slots *proc.Slots `yaml:"-"`
	// Unconfined runs commands without the sandbox (exec.unconfined),
	// where the kernel cannot confine them; only the clean environment,
	// the workspace as working directory and the timeout remain.
	Unconfined bool `yaml:"unconfined"`
	// Protect lists files commands never read, wherever they are (the
	// store, the config file); set by loadout.
	Protect []string `yaml:"-"`
	// keepUser runs commands as loadout's own user even when that is
	// root: the tests' way to show Landlock holds without the drop to
	// nobody.
	keepUser bool
}

// Dirs gives the directory a chat's commands run in (its workspace).
type Dirs interface {
	Dir(chatKey string) string
}

type input struct {
	Command string   `json:"command" desc:"program name, one of the allowed commands"`
	Args    []string `json:"args,omitempty" desc:"its arguments, one per item"`
	Stdin   string   `json:"stdin,omitempty" desc:"text for its standard input"`
}

type output struct {
	ExitCode int    `json:"exit_code"`
	Output   string `json:"output"`
	Note     string `json:"note,omitempty"`
}

// Tool returns exec.
func Tool(cfg Config, dirs Dirs) tools.Tool {
	if cfg.Timeout <= 0 {
		cfg.Timeout = 30 * time.Second
	}
	if cfg.MaxOutput <= 0 {
		cfg.MaxOutput = 16 << 10
	}
	if cfg.Path == "" {
		cfg.Path = "/usr/local/bin:/usr/bin:/bin"
	}
	cfg.Limits.setDefaults(cfg.Timeout)
	if cfg.Slots == nil {
		cfg.Slots = proc.NewSlots(cfg.MaxRunning)
	}
	return tools.New(tools.Definition{
		Name:        "exec",
		Examples:    []string{"run a command or script on the files", "execute a program in the workspace", "use a command line tool to process the data", "run a python snippet to calculate this", "use a shell command on the data", "process the csv with a script", "convert the file with a command line program", "execute the code and show the output", "calculate this with python", "run a program", "do the maths with a script", "resize the image with a command", "write a quick script and run it on the data"},
		Description: "Run an allowed command in this chat's workspace: " + strings.Join(cfg.Allow, ", ") + ".",
		// A command changes the workspace: mutating, so it asks after
		// untrusted content (tools.confirm_after_untrusted).
		Effect: tools.EffectMutate,
		// A command's output reads files and pages others wrote.
		Untrusted: true,
		// Confined to the workspace, a command reaches nothing else;
		// with the network on, it may connect anywhere, which no text
		// of its arguments can say.
		Reaches: func(context.Context, any) tools.Reach {
			if cfg.Network {
				return tools.UnknownReach("a command may connect anywhere (exec.network is on)")
			}
			return tools.Reach{}
		},
		Timeout: cfg.Timeout + 5*time.Second,
	}, func(ctx context.Context, in input) (any, error) {
		if !cfg.Enabled {
			return nil, &tools.Error{Code: "not_enabled", Message: "Running commands is off here.",
				Suggestion: "Tell the person the operator can turn it on with exec.enabled: true and list commands in exec.allow."}
		}
		if !slices.Contains(cfg.Allow, in.Command) {
			return nil, &tools.Error{Code: tools.CodePermission, Message: fmt.Sprintf("'%s' is not an allowed command.", in.Command),
				Suggestion: "Use one of: " + strings.Join(cfg.Allow, ", ") + ". The operator can add commands to exec.allow.",
				Details:    map[string]any{"allowed_commands": cfg.Allow}}
		}
		prog, err := look(in.Command, cfg.Path)
		if err != nil {
			return nil, &tools.Error{Code: tools.CodeNotFound, Message: fmt.Sprintf("'%s' is allowed but not installed here.", in.Command)}
		}
		chatKey := tools.CallerFrom(ctx).ChatKey
		dir := dirs.Dir(chatKey)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, err
		}
		return run(ctx, cfg, prog, in, dir)
	})
}

// look finds a command in path, or checks an absolute one.
func look(name, path string) (string, error) {
	if filepath.IsAbs(name) {
		if st, err := os.Stat(name); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return name, nil
		}
		return "", errors.New("not found")
	}
	if strings.ContainsRune(name, '/') {
		return "", errors.New("not found")
	}
	for _, d := range filepath.SplitList(path) {
		p := filepath.Join(d, name)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", errors.New("not found")
}

// capped keeps the first max bytes written and counts the rest.
type capped struct {
	buf     bytes.Buffer
	max     int
	dropped int
}

func (c *capped) Write(p []byte) (int, error) {
	room := c.max - c.buf.Len()
	if room >= len(p) {
		return c.buf.Write(p)
	}
	if room > 0 {
		c.buf.Write(p[:room])
	}
	c.dropped += len(p) - max(room, 0)
	return len(p), nil
}

func run(ctx context.Context, cfg Config, prog string, in input, dir string) (any, error) {
	// Wait for a place within the call's own timeout; one not had in
	// time is the executor's plain timeout, and nothing started.
	if err := cfg.Slots.Take(ctx); err != nil {
		return nil, fmt.Errorf("exec %s: waiting for a place: %w", in.Command, err)
	}
	defer cfg.Slots.Give()
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	env := []string{"PATH=" + cfg.Path, "HOME=" + dir, "LANG=C.UTF-8", "TMPDIR=" + dir}
	// The command runs under a keeper: it and whatever it starts end
	// with it, with its timeout, and with loadout.
	var cmd *proc.Cmd
	var report *os.File
	if cfg.Unconfined {
		cmd = proc.Command(ctx, prog, in.Args...)
		cmd.Env = env
	} else {
		s := newSpec(cfg, prog, in.Args, env, dir)
		if s.User != 0 {
			// The command runs as nobody: the workspace becomes
			// nobody's. It starts there, so it reaches it even where
			// the directories above are loadout's alone.
			if err := handOver(dir, s.User); err != nil {
				return nil, fmt.Errorf("hand the workspace over: %w", err)
			}
		}
		r, w, err := os.Pipe()
		if err != nil {
			return nil, err
		}
		defer r.Close()
		defer w.Close()
		report = r
		// The keeper runs the binary again as the confined child.
		cmd = proc.Command(ctx, proc.Self[0], proc.Self[1:]...)
		cmd.Env = []string{childEnv + "=" + s.encode()}
		cmd.ExtraFiles = []*os.File{w}
	}
	cmd.Dir = dir
	cmd.Stdin = strings.NewReader(in.Stdin)
	out := &capped{max: cfg.MaxOutput}
	cmd.Stdout, cmd.Stderr = out, out
	err := cmd.Start()
	if err == nil {
		for _, f := range cmd.ExtraFiles {
			f.Close() // the child's copy is the one left: EOF when it execs
		}
		err = cmd.Wait()
	}
	if report != nil {
		if why, _ := io.ReadAll(io.LimitReader(report, 4096)); len(why) > 0 {
			return nil, &tools.Error{Code: "not_available",
				Message:    fmt.Sprintf("The command could not be confined, so it did not run: %s.", strings.TrimSpace(string(why))),
				Suggestion: "Tell the person commands cannot run here now; the operator can check the server (or set exec.unconfined: true)."}
		}
	}
	res := output{Output: strings.ToValidUTF8(out.buf.String(), "�")}
	for !utf8.ValidString(res.Output) {
		res.Output = res.Output[:len(res.Output)-1]
	}
	var exit *exec.ExitError
	switch {
	case ctx.Err() == context.DeadlineExceeded:
		res.ExitCode = -1
		res.Note = fmt.Sprintf("Stopped after %s (exec.timeout).", cfg.Timeout)
	case errors.As(err, &exit):
		res.ExitCode = exit.ExitCode()
	case err != nil:
		return nil, fmt.Errorf("run %s: %w", in.Command, err)
	}
	if out.dropped > 0 {
		res.Note = strings.TrimSpace(res.Note + fmt.Sprintf(" The output was cut at %d bytes; %d more were dropped.", cfg.MaxOutput, out.dropped))
	}
	return res, nil
}

// Register adds the exec group when cfg.Enabled, once the confinement
// it needs is there (Check); protect are paths commands never reach
// (the store), besides cfg.Protect.
func Register(reg *tools.Registry, cfg Config, dirs Dirs, protect ...string) error {
	if !cfg.Enabled {
		return nil
	}
	if err := Check(cfg); err != nil {
		return err
	}
	cfg.Protect = append(slices.Clone(cfg.Protect), protect...)
	return reg.AddGroup(tools.Group{Name: "exec", DisplayName: "Commands",
		Description: "Run allowed commands (" + strings.Join(cfg.Allow, ", ") + ") on the chat's files"}, Tool(cfg, dirs))
}
