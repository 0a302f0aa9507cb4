package pdf

import (
	"strings"
	"testing"

	"loadout/tools"
)

// FuzzPDFText feeds damaged PDFs to the text extraction: it must answer
// with text or a plain error, never panic or hang. The seeds run with
// every `go test`; `go test -fuzz FuzzPDFText ./tools/pdf/` explores.
func FuzzPDFText(f *testing.F) {
	f.Add(document("", "Hello", "World"))
	f.Add(document("/Encrypt 9 0 R ", "secret"))
	f.Add([]byte("%PDF-1.4\n1 0 obj << /Type /Catalog /Pages 2 0 R >> endobj\ntrailer << /Root 1 0 R >>\n%%EOF"))
	f.Add([]byte("%PDF-"))
	f.Add([]byte("%PDF-1.7\nxref\n0 1\n0000000000 65535 f \ntrailer << /Size 1 >>\nstartxref\n9\n%%EOF"))
	g := &group{cfg: Config{MaxChars: 2000}}
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := open(data, "fuzz.pdf")
		if err != nil {
			var te *tools.Error
			if !asToolsError(err, &te) || te.Code != tools.CodeInvalidArgument || !strings.Contains(te.Message, "fuzz.pdf") {
				t.Fatalf("open: %v", err)
			}
			return
		}
		if _, err := safely("fuzz.pdf", func() (any, error) { return g.extract(r, "fuzz.pdf", textIn{}) }); err != nil {
			var te *tools.Error
			if !asToolsError(err, &te) {
				t.Fatalf("extract: %v", err)
			}
		}
	})
}

func asToolsError(err error, te **tools.Error) bool {
	e, ok := err.(*tools.Error)
	*te = e
	return ok
}
