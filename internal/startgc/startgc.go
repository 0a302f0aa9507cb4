// Package startgc holds the garbage collector back while the process
// starts. The libraries loadout links allocate about 3 MB as their
// packages initialise, most of it kept (compiled regular expressions,
// tables); with the runtime's first target of 4 MB, a collection ran in
// the middle of their initialisation, whose work and runtime metadata
// every process kept paying for. This package imports nothing but the
// runtime's packages, so Go initialises it early (it takes the first
// package in import-path order whose imports are done): after about 1.4
// of those 3 MB, well before a collection is due (cmd/loadout's
// TestNoCollectionWhilePackagesInitialise checks both). It sets the
// collector's GOGC to Percent until main calls Done: at once for every
// command but serve, and for serve once its channels are connected.
//
// It also turns off the runtime's sampling of allocations for heap
// profiles, which only a serve with http.pprof reads (Profiles turns it
// back on): each sample walks the stack and keeps a record for the
// allocation's site, and the table of those records grows, page by page,
// with the sites sampled for as long as the process runs.
package startgc

import (
	"runtime"
	"runtime/debug"
)

// Percent is the collector's GOGC while the process starts.
const Percent = 400

// operator is the GOGC the process was started with (100 unless the
// environment's GOGC says otherwise; negative when it is off).
var operator = start()

// start turns sampling off, holds the collector back and returns the
// operator's GOGC.
func start() int {
	runtime.MemProfileRate = 0
	return hold()
}

// sampling is the runtime's default rate of heap profile samples: one
// every 512 KiB allocated on average.
const sampling = 512 << 10

// Profiles turns sampling for heap profiles back on, at the runtime's
// default rate, for a process that serves them; what was allocated
// before is not in them.
func Profiles() { runtime.MemProfileRate = sampling }

// hold sets the collector's GOGC to Percent, unless the operator's is
// off or higher already, and returns the operator's.
func hold() int {
	gc := debug.SetGCPercent(Percent)
	if gc < 0 || gc >= Percent {
		debug.SetGCPercent(gc)
	}
	return gc
}

// Hold holds the collector back again, as the package's initialisation
// did (for a serve run after Done, as tests do), and returns Done.
func Hold() (done func()) {
	hold()
	return Done
}

// Done sets the collector's GOGC back to the operator's. Calling it
// again is harmless.
func Done() { debug.SetGCPercent(operator) }
