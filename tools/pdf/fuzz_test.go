package pdf

import (
	"encoding/json"
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
	f.Fuzz(func(t *testing.T, data []byte) {
		// The worker's side of the protocol, in this process: the request
		// as parse sends it, the answer as parse reads it.
		head, _ := json.Marshal(job{Op: opText, Name: "fuzz.pdf", MaxChars: 2000})
		out, err := Work(append(append(head, '\n'), data...))
		if err != nil {
			t.Fatalf("Work: %v", err)
		}
		var a answer
		if err := json.Unmarshal(out, &a); err != nil {
			t.Fatalf("the answer does not parse: %v", err)
		}
		switch {
		case a.Error != nil:
			if a.Error.Code != tools.CodeInvalidArgument || !strings.Contains(a.Error.Message, "fuzz.pdf") {
				t.Fatalf("error: %+v", a.Error)
			}
		case a.Text == nil:
			t.Fatalf("neither text nor an error: %s", out)
		}
	})
}

// FuzzWorkRequest feeds any request to the worker's job: whatever it is,
// the job answers with JSON or refuses the request, never panics.
func FuzzWorkRequest(f *testing.F) {
	f.Add([]byte(`{"op":"info","name":"a.pdf"}` + "\n%PDF-1.4"))
	f.Add([]byte(`{"op":"text","name":"a.pdf","max_chars":10,"in":{"first_page":2,"offset":-5}}` + "\n"))
	f.Add([]byte(`{"op":"render"}` + "\n"))
	f.Add([]byte("no header"))
	f.Add([]byte(""))
	f.Fuzz(func(t *testing.T, req []byte) {
		out, err := Work(req)
		if err != nil {
			return // refused: parse sees a *worker.JobError
		}
		var a answer
		if json.Unmarshal(out, &a) != nil || a.Error == nil && a.Info == nil && a.Text == nil {
			t.Fatalf("answer %q", out)
		}
	})
}

func asToolsError(err error, te **tools.Error) bool {
	e, ok := err.(*tools.Error)
	*te = e
	return ok
}
