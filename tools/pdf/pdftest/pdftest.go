// Package pdftest makes small PDFs for tests.
package pdftest

import (
	"bytes"
	"compress/zlib"
	"fmt"
	"strings"
)

// Document writes a PDF with one page per text, a title and an author,
// and a correct cross-reference table; trailer adds to the trailer.
func Document(trailer string, texts ...string) []byte {
	return document(trailer, func(t string) string {
		stream := fmt.Sprintf("BT /F1 24 Tf 72 700 Td (%s) Tj ET", t)
		return fmt.Sprintf("<< /Length %d >>\nstream\n%s\nendstream", len(stream), stream)
	}, texts...)
}

// MemoryBomb is a small PDF (about 600 bytes) whose one page's content
// is a FlateDecode stream with /DecodeParms << /Predictor 12 /Columns
// 1000000000000 >>: a reader that trusts the columns allocates a
// terabyte for a row.
func MemoryBomb() []byte {
	return document("", func(t string) string {
		var z bytes.Buffer
		w := zlib.NewWriter(&z)
		fmt.Fprintf(w, "\x02BT /F1 24 Tf 72 700 Td (%s) Tj ET", t)
		w.Close()
		return fmt.Sprintf("<< /Length %d /Filter /FlateDecode /DecodeParms << /Predictor 12 /Columns 1000000000000 >> >>\nstream\n%s\nendstream", z.Len(), z.Bytes())
	}, "boom")
}

func document(trailer string, content func(text string) string, texts ...string) []byte {
	objs := []string{"<< /Type /Catalog /Pages 2 0 R >>", ""}
	var kids []string
	for range texts {
		kids = append(kids, "")
	}
	font := 3
	objs = append(objs, "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
	for i, t := range texts {
		objs = append(objs, content(t))
		c := len(objs)
		objs = append(objs, fmt.Sprintf("<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents %d 0 R /Resources << /Font << /F1 %d 0 R >> >> >>", c, font))
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
