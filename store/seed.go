package store

import (
	"bytes"
	"compress/gzip"
	"crypto/rand"
	_ "embed"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
)

// A new SQLite database starts as a copy of this build's schema: the file
// migrate leaves on an empty one, kept in store/seed (TestSeeds checks
// both copies against migrate and, with -update, writes them). Building
// the schema in a new file took about 15 ms of a first start's 51 ms to
// the first poll: 6.9 ms of processor time for the 57 CREATE TABLE
// statements alone, as SQLite parses every CREATE three times (the
// statement, its row in sqlite_master, the schema entry read back) and
// writes the schema page by page. A copy is one write of a file SQLite
// then only reads.
var (
	//go:embed seed/fts5.db.gz
	seedFTS5 []byte // for a build whose SQLite has FTS5 (-tags sqlite_fts5)
	//go:embed seed/plain.db.gz
	seedPlain []byte
)

// seed puts the copy of the schema for fts at path when nothing is there
// yet. It does nothing for a file that exists (even empty, which SQLite
// takes for a new database), for ":memory:", and when the copy is not
// this build's schema (its user_version is not schemaStamp; TestSeeds
// fails then): migrate builds the schema as it always could.
//
// The copy is written to a file of its own beside path, synced, and
// linked to path only if path is still free, so a process that finds the
// file finds it whole, and two processes starting together on a new
// path leave one file, the first one's. A file system without hard links
// gets no seed.
func seed(path string, fts bool) error {
	if path == "" || path == ":memory:" {
		return nil
	}
	if _, err := os.Lstat(path); !errors.Is(err, fs.ErrNotExist) {
		return nil // there already, or not ours to judge: SQLite's open says
	}
	packed := seedPlain
	if fts {
		packed = seedFTS5
	}
	image, err := unpack(packed)
	if err != nil || stampOf(image) != schemaStamp(fts) {
		return nil
	}
	var suffix [8]byte
	rand.Read(suffix[:])
	tmp := path + ".new-" + hex.EncodeToString(suffix[:])
	// SQLite's own mode for the files it creates (0644, less the umask).
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return fmt.Errorf("store: create %s: %w", path, err)
	}
	defer os.Remove(tmp)
	_, err = f.Write(image)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("store: create %s: %w", path, err)
	}
	if err := os.Link(tmp, path); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil // no hard links here: SQLite creates the file and migrate the schema
	}
	return nil
}

// unpack is the gzip-compressed file packed.
func unpack(packed []byte) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(packed))
	if err != nil {
		return nil, err
	}
	return io.ReadAll(zr)
}

// stampOf is the user_version in a SQLite file's header: the schema stamp
// migrate wrote.
func stampOf(image []byte) int32 {
	const at = 60 // the header's user version, big-endian
	if len(image) < at+4 || !bytes.HasPrefix(image, []byte("SQLite format 3\x00")) {
		return -1
	}
	return int32(binary.BigEndian.Uint32(image[at:]))
}
