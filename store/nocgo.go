//go:build !cgo

package store

// Available reports whether this build can open SQLite databases: the
// driver needs cgo, and this build has none.
const Available = false

func busy(error) bool { return false }

func sqliteDuplicate(error) bool { return false }
