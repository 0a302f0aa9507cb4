//go:build !linux

package shell

import (
	"errors"
	"os"
)

// Check reports that commands cannot be confined on this system unless
// exec.unconfined is set.
func Check(cfg Config) error {
	if !cfg.Enabled || cfg.Unconfined {
		return nil
	}
	return errors.New("exec: commands can be confined only on Linux (Landlock). Set exec.unconfined: true to run them without confinement, or turn exec off")
}

func confineAndExec(spec, *os.File) error {
	return errors.New("commands can be confined only on Linux")
}

func handOver(string, int) error { return nil }
