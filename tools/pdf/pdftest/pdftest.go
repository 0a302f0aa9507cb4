// Package pdftest makes small PDFs for tests.
package pdftest

import (
	"bytes"
	"fmt"
	"strings"
)

// Document writes a PDF with one page per text, a title and an author,
// and a correct cross-reference table; trailer adds to the trailer.
func Document(trailer string, texts ...string) []byte {
	objs := []string{"<< /Type /Catalog /Pages 2 0 R >>", ""}
	var kids []string
	for range texts {
		kids = append(kids, "")
	}
	font := 3
	objs = append(objs, "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
	for i, t := range texts {
		stream := fmt.Sprintf("BT /F1 24 Tf 72 700 Td (%s) Tj ET", t)
		objs = append(objs, fmt.Sprintf("<< /Length %d >>\nstream\n%s\nendstream", len(stream), stream))
		content := len(objs)
		objs = append(objs, fmt.Sprintf("<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents %d 0 R /Resources << /Font << /F1 %d 0 R >> >> >>", content, font))
		kids[i] = fmt.Sprintf("%d 0 R", len(objs))
	}
	objs[1] = fmt.Sprintf("<< /Type /Pages /Kids [%s] /Count %d >>", strings.Join(kids, " "), len(texts))
	objs = append(objs, "<< /Title (Quarterly report) /Author (Ana) >>")
	info := len(objs)
	var b bytes.Buffer
	b.WriteString("%PDF-1.4\n")
	offsets := make([]int, len(objs))
	for i, o := range objs {
		offsets[i] = b.Len()
		fmt.Fprintf(&b, "%d 0 obj\n%s\nendobj\n", i+1, o)
	}
	xref := b.Len()
	fmt.Fprintf(&b, "xref\n0 %d\n0000000000 65535 f \n", len(objs)+1)
	for _, off := range offsets {
		fmt.Fprintf(&b, "%010d 00000 n \n", off)
	}
	fmt.Fprintf(&b, "trailer\n<< /Size %d /Root 1 0 R /Info %d 0 R %s>>\nstartxref\n%d\n%%%%EOF\n", len(objs)+1, info, trailer, xref)
	return b.Bytes()
}
