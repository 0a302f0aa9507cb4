package main

import (
	"context"
	"testing"

	"loadout/tools/pdf"
	"loadout/tools/pdf/pdftest"
)

// BenchmarkPDFWorker is one PDF read through a worker started from the
// whole loadout binary (this test binary holds all of it), against the
// same read in-process from a worker's point of view: the cost of
// starting the binary again, per call.
func BenchmarkPDFWorker(b *testing.B) {
	data := pdftest.Document("", "First page words", "Second page words", "Third page")
	for b.Loop() {
		if _, err := pdf.Text(context.Background(), data, "a.pdf", 2000, pdf.Limits{}); err != nil {
			b.Fatal(err)
		}
	}
}
