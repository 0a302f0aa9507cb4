//go:build !cgo

package store

// keepFreedMemory has nothing to tune without cgo: there is no SQLite.
func keepFreedMemory() {}
