//go:build !cgo

package store

// keepFreedMemory has nothing to tune without cgo: there is no SQLite.
func keepFreedMemory() {}

// giveBack has nothing to give back without cgo.
func giveBack() {}

// sqliteMemory is nothing without cgo.
func sqliteMemory() int64 { return 0 }

// hasFTS5 is false without cgo: there is no SQLite.
func hasFTS5() bool { return false }
