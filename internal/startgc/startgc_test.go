package startgc

import (
	"runtime/debug"
	"testing"
)

// The package holds the collector back from its initialisation until
// Done, and Done gives the operator's setting back; an operator's
// setting that is off or higher is never lowered.
func TestHoldAndDone(t *testing.T) {
	want := Percent
	if operator < 0 || operator >= Percent {
		want = operator
	}
	if got := debug.SetGCPercent(want); got != want {
		t.Errorf("GOGC while starting = %d, want %d", got, want)
	}
	Done()
	if got := debug.SetGCPercent(operator); got != operator {
		t.Errorf("GOGC after Done = %d, want the operator's %d", got, operator)
	}
	defer func(was int) { operator = was; Done() }(operator)
	for _, op := range []int{-1, 800} {
		operator = op
		debug.SetGCPercent(op)
		done := Hold()
		if got := debug.SetGCPercent(op); got != op {
			t.Errorf("operator's GOGC %d: while starting %d", op, got)
		}
		done()
	}
}
