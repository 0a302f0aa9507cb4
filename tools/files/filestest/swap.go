// Package filestest holds what tests of the chats' workspaces share.
package filestest

import (
	"os"
	"path/filepath"

	"loadout/tools/files"
)

// Swapping is a workspace whose file is replaced, right after it is
// checked (by Path or Open), by a link to Outside: what a command
// running in the workspace can do between loadout's check and a second
// open. Dir is the chat's workspace directory.
type Swapping struct {
	*files.Workspaces
	Dir, Outside string
}

func (s Swapping) swap(name string) {
	p := filepath.Join(s.Dir, name)
	os.Remove(p)
	os.Symlink(s.Outside, p)
}

// Path is the workspace's, and then the file is swapped.
func (s Swapping) Path(chatKey, name string) (string, error) {
	p, err := s.Workspaces.Path(chatKey, name)
	s.swap(name)
	return p, err
}

// Open is the workspace's, and then the file is swapped.
func (s Swapping) Open(chatKey, name string) (*os.File, error) {
	f, err := s.Workspaces.Open(chatKey, name)
	s.swap(name)
	return f, err
}
