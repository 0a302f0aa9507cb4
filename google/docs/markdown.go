package docs

import (
	"strconv"
	"strings"

	gdocs "google.golang.org/api/docs/v1"
)

// Markdown renders a document's body: headings as #, bulleted and
// numbered lists indented by level, tables as pipe tables, bold, italic
// and links as Markdown. It takes time linear in the document's size.
func Markdown(d *gdocs.Document) string {
	var b strings.Builder
	if d.Title != "" {
		b.WriteString("# " + d.Title + "\n\n")
	}
	writeContent(&b, d, body(d))
	return strings.TrimSpace(b.String()) + "\n"
}

func writeContent(b *strings.Builder, d *gdocs.Document, content []*gdocs.StructuralElement) {
	listed := false // the previous paragraph was a list item
	for _, el := range content {
		switch {
		case el.Paragraph != nil:
			p := el.Paragraph
			text := inline(p)
			if strings.TrimSpace(text) == "" && p.Bullet == nil {
				if listed {
					b.WriteString("\n")
				}
				listed = false
				continue
			}
			if p.Bullet != nil {
				level := int(p.Bullet.NestingLevel)
				marker := "-"
				if ordered(d, p.Bullet.ListId, level) {
					marker = "1."
				}
				b.WriteString(strings.Repeat("  ", level) + marker + " " + strings.TrimSpace(text) + "\n")
				listed = true
				continue
			}
			if listed {
				b.WriteString("\n")
				listed = false
			}
			if h := heading(p); h > 0 {
				b.WriteString(strings.Repeat("#", h) + " " + strings.TrimSpace(text) + "\n\n")
				continue
			}
			b.WriteString(strings.TrimSpace(text) + "\n\n")
		case el.Table != nil:
			if listed {
				b.WriteString("\n")
				listed = false
			}
			writeTable(b, d, el.Table)
		}
	}
}

// writeTable renders a table as a pipe table, its first row the header.
func writeTable(b *strings.Builder, d *gdocs.Document, t *gdocs.Table) {
	for i, row := range t.TableRows {
		b.WriteString("|")
		for _, cell := range row.TableCells {
			var cb strings.Builder
			for _, el := range cell.Content {
				if el.Paragraph != nil {
					if cb.Len() > 0 {
						cb.WriteString(" ")
					}
					cb.WriteString(strings.TrimSpace(inline(el.Paragraph)))
				}
			}
			b.WriteString(" " + strings.ReplaceAll(cb.String(), "|", `\|`) + " |")
		}
		b.WriteString("\n")
		if i == 0 {
			b.WriteString("|" + strings.Repeat(" --- |", len(row.TableCells)) + "\n")
		}
	}
	b.WriteString("\n")
}

// heading is a paragraph's heading level, 1–6 (a title is 1), or 0.
func heading(p *gdocs.Paragraph) int {
	if p.ParagraphStyle == nil {
		return 0
	}
	s := p.ParagraphStyle.NamedStyleType
	if s == "TITLE" {
		return 1
	}
	if n, ok := strings.CutPrefix(s, "HEADING_"); ok {
		if level, err := strconv.Atoi(n); err == nil && level >= 1 && level <= 6 {
			return level
		}
	}
	return 0
}

// ordered reports whether a list's level is numbered.
func ordered(d *gdocs.Document, listID string, level int) bool {
	l, ok := d.Lists[listID]
	if !ok || l.ListProperties == nil || level >= len(l.ListProperties.NestingLevels) {
		return false
	}
	n := l.ListProperties.NestingLevels[level]
	return n.GlyphType != "" && n.GlyphType != "GLYPH_TYPE_UNSPECIFIED" && n.GlyphType != "NONE"
}

// plain is a paragraph's text without formatting.
func plain(p *gdocs.Paragraph) string {
	var b strings.Builder
	for _, e := range p.Elements {
		if e.TextRun != nil {
			b.WriteString(e.TextRun.Content)
		}
	}
	return strings.TrimRight(b.String(), "\n")
}

// inline is a paragraph's text with bold, italic and links as Markdown.
func inline(p *gdocs.Paragraph) string {
	var b strings.Builder
	for _, e := range p.Elements {
		if e.TextRun == nil {
			continue
		}
		text := strings.TrimRight(e.TextRun.Content, "\n")
		if strings.TrimSpace(text) == "" {
			b.WriteString(text)
			continue
		}
		st := e.TextRun.TextStyle
		lead := text[:len(text)-len(strings.TrimLeft(text, " "))]
		trail := text[len(strings.TrimRight(text, " ")):]
		core := strings.TrimSpace(text)
		if st != nil {
			switch {
			case st.Bold && st.Italic:
				core = "***" + core + "***"
			case st.Bold:
				core = "**" + core + "**"
			case st.Italic:
				core = "*" + core + "*"
			}
			if st.Link != nil && st.Link.Url != "" {
				core = "[" + core + "](" + st.Link.Url + ")"
			}
		}
		b.WriteString(lead + core + trail)
	}
	return b.String()
}
