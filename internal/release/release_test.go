package release

import (
	"runtime"
	"testing"
)

// A release is due once the process is quiet and its heap holds Above
// more than the last release left; never while it works, never for less.
func TestDue(t *testing.T) {
	const mb = 1 << 20
	st := Start(Sample{Allocated: 100 * mb, Held: 6 * mb})
	steps := []struct {
		what string
		s    Sample
		due  bool
	}{
		{"idle, a few kilobytes allocated", Sample{100*mb + 4<<10, 6 * mb}, false},
		{"a burst: busy, the heap grown", Sample{140 * mb, 14 * mb}, false},
		{"still busy", Sample{180 * mb, 15 * mb}, false},
		{"quiet after the burst", Sample{180*mb + 8<<10, 15 * mb}, true},
	}
	for _, s := range steps {
		if got := st.Due(s.s); got != s.due {
			t.Errorf("%s: due %v, want %v", s.what, got, s.due)
		}
	}
	st.Released(Sample{180*mb + 16<<10, 7 * mb})
	steps = []struct {
		what string
		s    Sample
		due  bool
	}{
		{"quiet, grown by less than Above", Sample{180*mb + 20<<10, 8 * mb}, false},
		{"the scavenger gave some back", Sample{180*mb + 24<<10, 5 * mb}, false},
		{"a small burst", Sample{183 * mb, 7 * mb}, false},
		// Above is measured from the least held since the release (5
		// MB), not from what the release left (7 MB).
		{"quiet after it, Above over the least", Sample{183*mb + 1<<10, 7 * mb}, true},
	}
	for _, s := range steps {
		if got := st.Due(s.s); got != s.due {
			t.Errorf("%s: due %v, want %v", s.what, got, s.due)
		}
	}
}

var kept [][]byte

// Read sees allocation and what the heap holds.
func TestRead(t *testing.T) {
	runtime.GC()
	before := Read()
	for range 64 {
		kept = append(kept, make([]byte, 64<<10))
	}
	after := Read()
	if after.Allocated-before.Allocated < 4<<20 {
		t.Errorf("4 MiB allocated, %d bytes counted", after.Allocated-before.Allocated)
	}
	if after.Held < 4<<20 || after.Held <= before.Held {
		t.Errorf("the heap holds %d bytes with 4 MiB kept (%d before)", after.Held, before.Held)
	}
	kept = nil
}
