//go:build !cgo

package store

import "database/sql/driver"

// Available reports whether this build can open SQLite databases: the
// driver needs cgo, and this build has none.
const Available = false

func busy(error) bool { return false }

func sqliteDuplicate(error) bool { return false }

type writers struct{}

func newWriters() *writers { return nil }

func queueWrites(conn driver.Conn, _ *writers) driver.Conn { return conn }
