//go:build cgo

package store

/*
#include <stdlib.h>
#if defined(__GLIBC__) || defined(__linux__)
#include <malloc.h>
#endif

// keep_freed_memory raises the C allocator's trim threshold. SQLite frees
// and allocates its statement journals and page buffers on every write;
// with glibc's adaptive threshold each free handed the top of a thread's
// arena back to the kernel (madvise) and the next write faulted it in
// again, which cost a turn more than the turn's own SQL. It also bounds
// the allocator's arenas: glibc gives each thread that calls malloc an
// arena of its own, up to eight per core, and each keeps what was freed
// in it; SQLite, which does nearly all of this process's C allocation,
// runs on at most `arenas` connections at once.
static void keep_freed_memory(int arenas) {
#ifdef M_TRIM_THRESHOLD
	mallopt(M_TRIM_THRESHOLD, 1 << 20);
#endif
#ifdef M_ARENA_MAX
	mallopt(M_ARENA_MAX, arenas);
#endif
}

// sqlite_memory is what SQLite holds of the C allocator's memory.
extern int sqlite3_status64(int op, long long *current, long long *highwater, int reset);
static long long sqlite_memory(void) {
	long long current = 0, highwater = 0;
	sqlite3_status64(0, &current, &highwater, 0); // SQLITE_STATUS_MEMORY_USED
	return current;
}

// has_fts5 reports whether this build's SQLite has FTS5.
extern int sqlite3_compileoption_used(const char *name);
static int has_fts5(void) { return sqlite3_compileoption_used("ENABLE_FTS5"); }

// give_back hands the C allocator's free memory back to the kernel.
static void give_back(void) {
#ifdef __GLIBC__
	malloc_trim(0);
#endif
}
*/
import "C"

import "sync"

// keepFreedMemory runs keep_freed_memory once, before the first SQLite
// database is opened. What it keeps is bounded: a thread's arena returns
// memory above 1 MiB of free space at its top, as it did before the
// threshold adapted.
var keepFreedMemory = sync.OnceFunc(func() { C.keep_freed_memory(C.int(maxConns)) })

// sqliteMemory is what SQLite holds of the C allocator's memory, in
// bytes, every connection of the process together.
func sqliteMemory() int64 { return int64(C.sqlite_memory()) }

// hasFTS5 reports whether this build's SQLite has FTS5 (-tags
// sqlite_fts5), without a database to ask.
var hasFTS5 = sync.OnceValue(func() bool { return C.has_fts5() == 1 })

// giveBack hands what the C allocator kept (see keepFreedMemory) back to
// the system.
func giveBack() { C.give_back() }
