//go:build cgo

package store

import (
	"errors"

	"github.com/mattn/go-sqlite3"
)

// Available reports whether this build can open SQLite databases: the
// driver needs cgo.
const Available = true

// busy reports whether err is SQLite's busy or locked.
func busy(err error) bool {
	var se sqlite3.Error
	return errors.As(err, &se) && (se.Code == sqlite3.ErrBusy || se.Code == sqlite3.ErrLocked)
}

// sqliteDuplicate reports whether err is SQLite's refusal of a row a
// unique index or its primary key already holds.
func sqliteDuplicate(err error) bool {
	var se sqlite3.Error
	return errors.As(err, &se) && (se.ExtendedCode == sqlite3.ErrConstraintUnique || se.ExtendedCode == sqlite3.ErrConstraintPrimaryKey)
}
