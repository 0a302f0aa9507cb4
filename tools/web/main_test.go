package web

import (
	"os"
	"testing"

	pdfpkg "loadout/tools/pdf"
	"loadout/worker"
)

// TestMain lets the PDF reader run this test binary as its worker.
func TestMain(m *testing.M) {
	worker.Serve(map[string]worker.Func{pdfpkg.Job: pdfpkg.Work})
	os.Exit(m.Run())
}
