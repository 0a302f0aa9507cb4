// Package pdf is the pdf group: a PDF's details, its text by page range,
// and a page rendered to PNG in the chat's workspace (to send, or to show
// a model that reads images). A PDF comes from the chat's workspace or
// from a URL, fetched through the web tools' guard.
package pdf

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/ledongthuc/pdf"

	"loadout/proc"
	"loadout/tools"
	"loadout/worker"
)

// Workspaces are the chats' files, as the files tool keeps them.
type Workspaces interface {
	// Open opens a file of the chat's workspace, checked to be inside
	// it and the chat's own; the file read is the file checked.
	Open(chatKey, name string) (*os.File, error)
	Save(ctx context.Context, chatKey, name string, r io.Reader) (string, int64, error)
}

// Config configures the pdf group.
type Config struct {
	Workspaces Workspaces `yaml:"-"`
	// Fetch downloads a PDF from a URL through the guard; nil refuses
	// URLs.
	Fetch func(ctx context.Context, url string) ([]byte, error) `yaml:"-"`
	// Drive downloads a Google Drive file as the caller; nil refuses
	// Drive file ids.
	Drive func(ctx context.Context, fileID string, max int64) (name string, data []byte, err error) `yaml:"-"`
	// MaxBytes caps a PDF read (pdf.max_bytes); default 50 MB.
	MaxBytes int64 `yaml:"max_bytes"`
	// MaxChars caps the text one call returns (pdf.max_chars); default
	// 20000.
	MaxChars int `yaml:"max_chars"`
	// Renderer is poppler's pdftoppm (pdf.renderer); default the one on
	// PATH. Without it, render says what to install.
	Renderer string `yaml:"renderer"`
	// Limits bound the worker process a PDF is parsed in (pdf.limits):
	// memory, processor time, wall-clock time.
	Limits Limits `yaml:"limits"`
	// MaxWorkers is how many PDF workers the whole process runs at once
	// (pdf.max_workers), whatever the number of calls and chats; the
	// rest wait within their call's timeout. Default the number of CPUs.
	// loadout makes one proc.Slots of it and gives it to every reader
	// of PDFs (Limits.Slots).
	MaxWorkers int `yaml:"max_workers"`
}

// Limits bound the worker that parses one PDF.
type Limits struct {
	// MemoryMB is the memory it may take (pdf.limits.memory_mb); default
	// 512.
	MemoryMB int `yaml:"memory_mb"`
	// CPU is its processor time (pdf.limits.cpu); default 20s.
	CPU time.Duration `yaml:"cpu"`
	// Wall is how long it may take once started (pdf.limits.wall);
	// default 30s.
	Wall time.Duration `yaml:"wall"`
	// Slots are the process's places for workers (pdf.max_workers); nil
	// is the worker package's own, sized to the number of CPUs.
	Slots *proc.Slots `yaml:"-"`
}

func (l Limits) worker() worker.Limits {
	return worker.Limits{MemoryMB: l.MemoryMB, CPU: l.CPU, Wall: l.Wall, Slots: l.Slots}
}

// Group is the pdf group's description.
func Group() tools.Group {
	return tools.Group{Name: "pdf", DisplayName: "PDF", Description: "Read PDFs: details, text, pages as pictures"}
}

type source struct {
	Path    string `json:"path,omitempty" desc:"a PDF in the chat's workspace" reach:"path"`
	URL     string `json:"url,omitempty" desc:"or a PDF's URL" reach:"url"`
	DriveID string `json:"drive_file_id,omitempty" desc:"or a Google Drive file id"`
}

type infoOut struct {
	Pages     int    `json:"pages"`
	Title     string `json:"title,omitempty"`
	Author    string `json:"author,omitempty"`
	Encrypted bool   `json:"encrypted"`
	Bytes     int    `json:"bytes"`
}

type textIn struct {
	Path      string `json:"path,omitempty" desc:"a PDF in the chat's workspace" reach:"path"`
	URL       string `json:"url,omitempty" desc:"or a PDF's URL" reach:"url"`
	DriveID   string `json:"drive_file_id,omitempty" desc:"or a Google Drive file id"`
	FirstPage int    `json:"first_page,omitempty" desc:"default 1"`
	LastPage  int    `json:"last_page,omitempty" desc:"default the last"`
	Offset    int    `json:"offset,omitempty" desc:"character to read on from"`
}

type textOut struct {
	Pages      string `json:"pages"`
	Text       string `json:"text"`
	TotalChars int    `json:"total_chars"`
	NextOffset int    `json:"next_offset,omitempty"`
	Note       string `json:"note,omitempty"`
}

type renderIn struct {
	Path    string `json:"path,omitempty" desc:"a PDF in the chat's workspace" reach:"path"`
	URL     string `json:"url,omitempty" desc:"or a PDF's URL" reach:"url"`
	DriveID string `json:"drive_file_id,omitempty" desc:"or a Google Drive file id"`
	Page    int    `json:"page" desc:"page number, from 1"`
	DPI     int    `json:"dpi,omitempty" desc:"default 110"`
}

type renderOut struct {
	Saved string `json:"saved"`
	Page  int    `json:"page"`
	Note  string `json:"note"`
}

// Tools returns pdf_info, pdf_text and pdf_render.
func Tools(cfg Config) []tools.Tool {
	if cfg.MaxBytes <= 0 {
		cfg.MaxBytes = 50 << 20
	}
	if cfg.MaxChars <= 0 {
		cfg.MaxChars = 20000
	}
	if cfg.Renderer == "" {
		cfg.Renderer, _ = exec.LookPath("pdftoppm")
	}
	g := &group{cfg: cfg}
	return []tools.Tool{
		tools.New(tools.Definition{Name: "pdf_info", Description: "A PDF's pages, title, author and whether it is encrypted.",
			Examples: []string{"how many pages is the pdf", "who is the author of the pdf", "is the pdf locked with a password", "how many pages in the document pdf", "is this pdf password protected", "the title and author of the pdf", "page count of the attached file", "details about this pdf file", "who made the pdf and when", "is the pdf long"}, ReadOnly: true, Untrusted: true, Timeout: 60 * time.Second,
			PersonalFor: tools.By(func(_ context.Context, in source) bool { return in.DriveID != "" })}, g.info),
		tools.New(tools.Definition{Name: "pdf_text", Description: "The text of a PDF's pages.",
			Examples: []string{"read the pdf", "what does the pdf document say", "get the text out of a pdf file", "summarize the pdf", "what's written in the pdf", "read me page 2 of the pdf", "copy the text from the pdf invoice", "go through the pdf and list the key points", "what does the contract pdf say about cancellation", "what's in the document I sent, it's a pdf", "find the total on the invoice pdf", "quote the paragraph about fees from the pdf", "what does the invoice pdf I sent say"}, ReadOnly: true, Untrusted: true, Timeout: 60 * time.Second,
			// A PDF from the person's Drive is theirs, as Drive's own
			// results are; one from the chat's files or the web is not.
			PersonalFor: tools.By(func(_ context.Context, in textIn) bool { return in.DriveID != "" })}, g.text),
		tools.New(tools.Definition{Name: "pdf_render", Description: "Render a PDF page to a PNG in the workspace.",
			Examples: []string{"show a page of the pdf as a picture", "make an image of the pdf page", "turn a pdf page into a png", "let me see the chart on page 3 of the pdf", "screenshot of the pdf page", "convert the pdf page to an image", "picture of the pdf's first page", "show me the page itself, not the text", "I want to see what the first page of the pdf looks like"}, Untrusted: true, Timeout: 60 * time.Second}, g.render),
	}
}

type group struct{ cfg Config }

// load reads the PDF a call names; name is what it is called in results.
func (g *group) load(ctx context.Context, s source) (data []byte, name string, err error) {
	chatKey := tools.CallerFrom(ctx).ChatKey
	given := 0
	for _, v := range []string{s.Path, s.URL, s.DriveID} {
		if v != "" {
			given++
		}
	}
	switch {
	case given > 1:
		return nil, "", &tools.Error{Code: tools.CodeInvalidArgument, Message: "Give one of path, url and drive_file_id."}
	case s.DriveID != "":
		if g.cfg.Drive == nil {
			return nil, "", &tools.Error{Code: "not_available", Message: "Google Drive is not set up here."}
		}
		name, data, err = g.cfg.Drive(ctx, s.DriveID, g.cfg.MaxBytes)
	case s.Path != "":
		f, err := g.cfg.Workspaces.Open(chatKey, s.Path)
		if err != nil {
			return nil, "", &tools.Error{Code: tools.CodeNotFound, Message: fmt.Sprintf("There is no file '%s' in this chat's workspace.", s.Path),
				Suggestion: "List the files with the files tool."}
		}
		defer f.Close()
		data, err = io.ReadAll(io.LimitReader(f, g.cfg.MaxBytes+1))
		name = s.Path
	case s.URL != "":
		if g.cfg.Fetch == nil {
			return nil, "", &tools.Error{Code: "not_available", Message: "PDFs cannot be fetched from URLs here."}
		}
		data, err = g.cfg.Fetch(ctx, s.URL)
		name = path.Base(s.URL)
	default:
		return nil, "", tools.MissingParameter("pdf tools", "read", "path")
	}
	if err != nil {
		return nil, "", err
	}
	if int64(len(data)) > g.cfg.MaxBytes {
		return nil, "", &tools.Error{Code: "too_large", Message: fmt.Sprintf("The PDF is larger than %d bytes (pdf.max_bytes).", g.cfg.MaxBytes)}
	}
	if !bytes.HasPrefix(bytes.TrimLeft(data, "\x00\t\r\n "), []byte("%PDF-")) {
		return nil, "", &tools.Error{Code: tools.CodeInvalidArgument, Message: fmt.Sprintf("'%s' is not a PDF.", name)}
	}
	return data, name, nil
}

// open parses a PDF; an encrypted or damaged one is a plain error.
func open(data []byte, name string) (r *pdf.Reader, err error) {
	defer func() {
		if recover() != nil {
			r, err = nil, damaged(name)
		}
	}()
	r, err = pdf.NewReader(bytes.NewReader(data), int64(len(data)))
	if err == nil {
		return r, nil
	}
	if encrypted(data) || errors.Is(err, pdf.ErrInvalidPassword) {
		return nil, errEncrypted(name)
	}
	return nil, damaged(name)
}

func errEncrypted(name string) *tools.Error {
	return &tools.Error{Code: tools.CodeInvalidArgument, Message: fmt.Sprintf("'%s' is encrypted and cannot be read without its password.", name),
		Suggestion: "Ask the person for an unprotected copy.", Details: map[string]any{"encrypted": true}}
}

func damaged(name string) *tools.Error {
	return &tools.Error{Code: tools.CodeInvalidArgument, Message: fmt.Sprintf("'%s' is damaged or not a readable PDF.", name)}
}

func encrypted(data []byte) bool { return bytes.Contains(data, []byte("/Encrypt")) }

func (g *group) info(ctx context.Context, in source) (any, error) {
	data, name, err := g.load(ctx, in)
	if err != nil {
		return nil, err
	}
	out, err := parse(ctx, g.cfg.Limits, job{Op: opInfo, Name: name}, data)
	if err != nil {
		return nil, err
	}
	return *out.Info, nil
}

// infoOf is info's reading, in the worker.
func infoOf(data []byte, name string) (infoOut, error) {
	r, err := open(data, name)
	var te *tools.Error
	if errors.As(err, &te) && te.Details["encrypted"] == true {
		return infoOut{Encrypted: true, Bytes: len(data)}, nil
	}
	if err != nil {
		return infoOut{}, err
	}
	out, err := safely(name, func() (any, error) {
		info := r.Trailer().Key("Info")
		return infoOut{Pages: r.NumPage(), Title: info.Key("Title").Text(), Author: info.Key("Author").Text(),
			Encrypted: encrypted(data), Bytes: len(data)}, nil
	})
	if err != nil {
		return infoOut{}, err
	}
	return out.(infoOut), nil
}

// safely runs a step of reading a PDF, turning a panic of the PDF
// library on a damaged file into a plain error.
func safely(name string, fn func() (any, error)) (out any, err error) {
	defer func() {
		if recover() != nil {
			out, err = nil, damaged(name)
		}
	}()
	return fn()
}

// Text is the text of the PDF data (named name in errors), page after
// page, at most maxChars characters of it (and a note when there was
// more), read as pdf_text reads it: the page tree's walk is bounded, so a
// hostile file cannot hold the caller. Other parts that meet PDFs (web
// pages, mail attachments) read them through it.
//
// The PDF is parsed in a worker process under limits (the default ones
// when l is zero): a file that crashes the reader or asks it for more
// memory than allowed is an error, not the end of loadout.
func Text(ctx context.Context, data []byte, name string, maxChars int, l Limits) (string, error) {
	out, err := parse(ctx, l, job{Op: opText, Name: name, MaxChars: maxChars}, data)
	if err != nil {
		return "", err
	}
	t := *out.Text
	text := t.Text
	if t.Note != "" {
		text = strings.TrimSpace(text + "\n[" + t.Note + "]")
	}
	return text, nil
}

func (g *group) text(ctx context.Context, in textIn) (any, error) {
	data, name, err := g.load(ctx, source{in.Path, in.URL, in.DriveID})
	if err != nil {
		return nil, err
	}
	out, err := parse(ctx, g.cfg.Limits, job{Op: opText, Name: name, MaxChars: g.cfg.MaxChars, In: in}, data)
	if err != nil {
		return nil, err
	}
	return *out.Text, nil
}

// textOf is text's reading, in the worker.
func textOf(data []byte, name string, maxChars int, in textIn) (textOut, error) {
	r, err := open(data, name)
	if err != nil {
		return textOut{}, err
	}
	out, err := safely(name, func() (any, error) { return extract(r, name, maxChars, in) })
	if err != nil {
		return textOut{}, err
	}
	return out.(textOut), nil
}

// extract is text's reading of the pages.
func extract(r *pdf.Reader, name string, maxChars int, in textIn) (any, error) {
	n := r.NumPage()
	first, last := max(in.FirstPage, 1), in.LastPage
	if last <= 0 || last > n {
		last = n
	}
	if first > last {
		return nil, &tools.Error{Code: tools.CodeInvalidArgument, Message: fmt.Sprintf("'%s' has %d pages; pages %d to %d do not exist.", name, n, first, last)}
	}
	var b strings.Builder
	fonts := map[string]*pdf.Font{}
	for i := first; i <= last; i++ {
		if i-first == maxPages {
			last = i - 1 // the rest on a later call
			break
		}
		p, ok := page(r, i)
		if !ok || !parentsEnd(p) {
			return nil, damaged(name)
		}
		if p.V.IsNull() {
			continue
		}
		for _, f := range p.Fonts() {
			if _, ok := fonts[f]; !ok {
				font := p.Font(f)
				fonts[f] = &font
			}
		}
		t, err := p.GetPlainText(fonts)
		if err != nil {
			continue
		}
		fmt.Fprintf(&b, "--- page %d ---\n%s\n", i, strings.TrimSpace(t))
		// Enough for this call and the offset: later pages wait.
		if b.Len() > 4*(in.Offset+maxChars) {
			last = i
			break
		}
	}
	out := textOut{Pages: fmt.Sprintf("%d-%d of %d", first, last, n)}
	out.Text, out.TotalChars, out.NextOffset = tools.Window(b.String(), max(in.Offset, 0), maxChars)
	if out.NextOffset > 0 {
		out.Note = fmt.Sprintf("More text follows: call again with offset %d.", out.NextOffset)
	}
	if strings.TrimSpace(out.Text) == "" && in.Offset == 0 {
		out.Note = "These pages have no text layer (a scan?). pdf_render shows a page as a picture."
	}
	return out, nil
}

func (g *group) render(ctx context.Context, in renderIn) (any, error) {
	if g.cfg.Renderer == "" {
		return nil, &tools.Error{Code: "not_configured", Message: "Pages cannot be rendered here: poppler's pdftoppm is not installed.",
			Suggestion: "Tell the person the operator can install poppler-utils (or set pdf.renderer)."}
	}
	if in.Page < 1 {
		return nil, tools.MissingParameter("pdf_render", "render", "page")
	}
	dpi := in.DPI
	if dpi <= 0 {
		dpi = 110
	}
	dpi = min(dpi, 300)
	data, name, err := g.load(ctx, source{in.Path, in.URL, in.DriveID})
	if err != nil {
		return nil, err
	}
	out, err := parse(ctx, g.cfg.Limits, job{Op: opInfo, Name: name}, data)
	if err != nil {
		return nil, err
	}
	if out.Info.Encrypted && out.Info.Pages == 0 {
		return nil, errEncrypted(name)
	}
	if in.Page > out.Info.Pages {
		return nil, &tools.Error{Code: tools.CodeInvalidArgument, Message: fmt.Sprintf("'%s' has %d pages.", name, out.Info.Pages)}
	}
	dir, err := os.MkdirTemp("", "loadout-pdf-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	src := filepath.Join(dir, "in.pdf")
	if err := os.WriteFile(src, data, 0o600); err != nil {
		return nil, err
	}
	page := fmt.Sprint(in.Page)
	cmd := exec.CommandContext(ctx, g.cfg.Renderer, "-png", "-singlefile", "-r", fmt.Sprint(dpi), "-f", page, "-l", page, src, filepath.Join(dir, "out"))
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("pdftoppm: %v: %s", err, out)
	}
	f, err := os.Open(filepath.Join(dir, "out.png"))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	base := strings.TrimSuffix(path.Base(name), path.Ext(name))
	saved, _, err := g.cfg.Workspaces.Save(ctx, tools.CallerFrom(ctx).ChatKey, fmt.Sprintf("%s-page-%d.png", base, in.Page), f)
	if err != nil {
		return nil, err
	}
	return renderOut{Saved: saved, Page: in.Page, Note: "Saved in the workspace: send it with the files tool."}, nil
}

// Bounds on walking a PDF, whose structure the file's author controls: a
// page tree or a chain of parents that refers back to itself would
// otherwise be walked for ever, and a page count is only a claim.
const (
	maxSteps   = 10000 // page tree nodes looked at to find one page
	maxParents = 64    // inherited attributes looked up this far
	maxPages   = 500   // pages read by one pdf_text call
)

// page finds page num (from 1) as the library does, within maxSteps; it
// reports false for a page tree that does not end.
func page(r *pdf.Reader, num int) (pdf.Page, bool) {
	num--
	node := r.Trailer().Key("Root").Key("Pages")
	steps := 0
search:
	for node.Key("Type").Name() == "Pages" {
		if int(node.Key("Count").Int64()) < num {
			return pdf.Page{}, true
		}
		kids := node.Key("Kids")
		for i := 0; i < kids.Len(); i++ {
			if steps++; steps > maxSteps {
				return pdf.Page{}, false
			}
			kid := kids.Index(i)
			switch kid.Key("Type").Name() {
			case "Pages":
				c := int(kid.Key("Count").Int64())
				if num < c {
					node = kid
					continue search
				}
				num -= c
			case "Page":
				if num == 0 {
					return pdf.Page{V: kid}, true
				}
				num--
			}
		}
		break
	}
	return pdf.Page{}, true
}

// parentsEnd reports whether p's chain of parents ends, so the library's
// lookup of inherited resources does too.
func parentsEnd(p pdf.Page) bool {
	n := 0
	for v := p.V; !v.IsNull(); v = v.Key("Parent") {
		if n++; n > maxParents {
			return false
		}
	}
	return true
}

// Register adds the pdf group.
func Register(reg *tools.Registry, cfg Config) error { return reg.AddGroup(Group(), Tools(cfg)...) }
