//go:build !cgo

package store

// keepFreedMemory has nothing to tune without cgo: there is no SQLite.
func keepFreedMemory() {}

// GiveBack has nothing to give back without cgo.
func GiveBack() {}
