package pdf

import (
	"os"
	"testing"

	"loadout/worker"
)

// TestMain lets the PDF reader run this test binary as its worker.
func TestMain(m *testing.M) {
	worker.Serve(map[string]worker.Func{Job: Work})
	os.Exit(m.Run())
}
