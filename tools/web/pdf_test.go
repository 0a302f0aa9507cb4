package web

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	pdfpkg "loadout/tools/pdf"
)

// Found by probing: a PDF whose page tree lists itself among its kids
// kept the PDF library walking for ever, and web fetch read PDFs through
// it: one hostile page would have held a worker (the pdf group's own
// reading was already bounded). Reading is bounded now, shared with it.
func TestSelfReferencingPDFDoesNotHang(t *testing.T) {
	raw, err := os.ReadFile("../pdf/testdata/fuzz/FuzzPDFText/b56b44f985864d1c")
	if err != nil {
		t.Fatal(err)
	}
	// The corpus file is "go test fuzz v1" then []byte("…") in Go syntax.
	line := strings.SplitN(string(raw), "\n", 2)[1]
	quoted := strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(line), "[]byte("), ")")
	data, err := strconv.Unquote(quoted)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := pdfText(context.Background(), pdfpkg.Limits{}, []byte(data))
		done <- err
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("reading the PDF did not end")
	}
}
