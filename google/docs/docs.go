// Package docs is the google_docs tool group: create, read (as
// Markdown), write into and comment threads of the calling person's
// Google Docs, through the Docs API (and Drive for comments).
package docs

import (
	"context"
	"fmt"
	"strings"
	"unicode/utf16"

	gdocs "google.golang.org/api/docs/v1"
	gdrive "google.golang.org/api/drive/v3"

	"loadout/backoff"
	"loadout/google"
	"loadout/tools"
)

// GroupName is the group's name for load_tool_group.
const GroupName = "google_docs"

// Service is the Docs API as the group asks google.Client for it.
func Service() google.Service {
	return google.Service{Group: GroupName, Path: "docs/", Scopes: []string{gdocs.DocumentsScope}}
}

// CommentsService is the Drive API the group reads comments through.
func CommentsService() google.Service {
	return google.Service{Group: GroupName, Path: "drive/v3/", Scopes: []string{gdrive.DriveReadonlyScope}}
}

// Options tunes the group. The zero value is the default.
type Options struct {
	// Backoff retries temporary Google errors.
	Backoff backoff.Policy
	// MaxChars caps what docs_read returns in one call; default 30,000.
	MaxChars int
}

// New returns the google_docs group, its tools and scopes, acting as the
// calling person through c.
func New(c google.Client, o Options) google.Group {
	if o.MaxChars <= 0 {
		o.MaxChars = 30000
	}
	g := &group{opts: o,
		api:   google.API[gdocs.Service]{Client: c, Service: Service(), New: gdocs.NewService, Backoff: o.Backoff},
		drive: google.API[gdrive.Service]{Client: c, Service: CommentsService(), New: gdrive.NewService, Backoff: o.Backoff}}
	return google.Group{Examples: examples,
		Group: tools.Group{Name: GroupName, DisplayName: "Google Docs",
			Description: "The person's Google Docs: create, read as Markdown, append or insert under a heading, find and replace, comments."},
		Tools: []tools.Tool{
			tools.New(tools.Definition{Name: "docs_create", Description: "Create a Google Doc with a title and optional text."}, g.create),
			tools.New(tools.Definition{Name: "docs_read", Description: "Read a Google Doc as Markdown (headings, lists, tables, links), in parts for long ones.", ReadOnly: true, Untrusted: true}, g.read),
			tools.New(tools.Definition{Name: "docs_write", Description: "Add text to a Google Doc: at the end, or right under a heading."}, g.write),
			tools.New(tools.Definition{Name: "docs_replace", Description: "Find and replace text everywhere in a Google Doc.",
				Effect: tools.EffectMutate}, g.replace),
			tools.New(tools.Definition{Name: "docs_comments", Description: "List a Google Doc's comments with the text they are on and their replies.", ReadOnly: true, Untrusted: true}, g.comments),
		},
		Scopes: append(Service().Scopes, CommentsService().Scopes...),
	}
}

type group struct {
	opts  Options
	api   google.API[gdocs.Service]
	drive google.API[gdrive.Service]
}

func what(id string) string { return fmt.Sprintf("the document '%s'", id) }

type createIn struct {
	Title string `json:"title"`
	Text  string `json:"text,omitempty" desc:"plain text of the body"`
}

func (g *group) create(ctx context.Context, in createIn) (any, error) {
	if err := google.Required("title", in.Title); err != nil {
		return nil, err
	}
	svc, err := g.api.Connect(ctx)
	if err != nil {
		return nil, err
	}
	var d *gdocs.Document
	if err := g.api.CallOnce(ctx, "the new document", func() (err error) {
		d, err = svc.Documents.Create(&gdocs.Document{Title: strings.TrimSpace(in.Title)}).Context(ctx).Do()
		return err
	}); err != nil {
		return nil, err
	}
	if in.Text != "" {
		req := &gdocs.BatchUpdateDocumentRequest{Requests: []*gdocs.Request{{InsertText: &gdocs.InsertTextRequest{
			Text: in.Text, EndOfSegmentLocation: &gdocs.EndOfSegmentLocation{}}}}}
		if err := g.api.Call(ctx, what(d.DocumentId), func() error {
			_, err := svc.Documents.BatchUpdate(d.DocumentId, req).Context(ctx).Do()
			return err
		}); err != nil {
			return nil, err
		}
	}
	return map[string]any{"status": "created", "document_id": d.DocumentId, "title": d.Title, "link": link(d.DocumentId)}, nil
}

func link(id string) string { return "https://docs.google.com/document/d/" + id + "/edit" }

type readIn struct {
	DocumentID string `json:"document_id"`
	Offset     int    `json:"offset,omitempty" desc:"character to start at, for the next part"`
}

func (g *group) read(ctx context.Context, in readIn) (any, error) {
	if err := google.Required("document_id", in.DocumentID); err != nil {
		return nil, err
	}
	d, err := google.Do(ctx, g.api, what(in.DocumentID), func(s *gdocs.Service) (*gdocs.Document, error) {
		return s.Documents.Get(in.DocumentID).Context(ctx).Do()
	})
	if err != nil {
		return nil, err
	}
	md := Markdown(d)
	runes := []rune(md)
	start := min(max(in.Offset, 0), len(runes))
	end := min(start+g.opts.MaxChars, len(runes))
	out := map[string]any{"document_id": d.DocumentId, "title": d.Title, "markdown": string(runes[start:end])}
	if end < len(runes) {
		out["next_offset"] = end
		out["note"] = fmt.Sprintf("The document has %d characters; call docs_read with offset %d for the rest.", len(runes), end)
	}
	return out, nil
}

type writeIn struct {
	DocumentID   string `json:"document_id"`
	Text         string `json:"text" desc:"plain text; new lines start new paragraphs"`
	AfterHeading string `json:"after_heading,omitempty" desc:"insert right under this heading's line instead of at the end"`
}

func (g *group) write(ctx context.Context, in writeIn) (any, error) {
	if err := google.Required("document_id", in.DocumentID); err != nil {
		return nil, err
	}
	if err := google.Required("text", in.Text); err != nil {
		return nil, err
	}
	svc, err := g.api.Connect(ctx)
	if err != nil {
		return nil, err
	}
	text := strings.TrimRight(in.Text, "\n")
	var reqs []*gdocs.Request
	if in.AfterHeading == "" {
		reqs = append(reqs, &gdocs.Request{InsertText: &gdocs.InsertTextRequest{Text: "\n" + text, EndOfSegmentLocation: &gdocs.EndOfSegmentLocation{}}})
	} else {
		var d *gdocs.Document
		if err := g.api.Call(ctx, what(in.DocumentID), func() (err error) {
			d, err = svc.Documents.Get(in.DocumentID).Context(ctx).Do()
			return err
		}); err != nil {
			return nil, err
		}
		h, last, headings := findHeading(d, in.AfterHeading)
		if h == nil {
			return nil, &tools.Error{Code: tools.CodeNotFound, Message: fmt.Sprintf("No heading '%s' in the document.", in.AfterHeading),
				Suggestion: "Use one of its headings: " + strings.Join(headings, "; "), Details: map[string]any{"headings": headings}}
		}
		if !last {
			// The start of the next paragraph: the new text is a
			// paragraph of its own, styled as body text follows.
			reqs = append(reqs, &gdocs.Request{InsertText: &gdocs.InsertTextRequest{Text: text + "\n", Location: &gdocs.Location{Index: h.EndIndex}}})
		} else {
			n := int64(len(utf16.Encode([]rune(text))))
			reqs = append(reqs,
				&gdocs.Request{InsertText: &gdocs.InsertTextRequest{Text: "\n" + text, EndOfSegmentLocation: &gdocs.EndOfSegmentLocation{}}},
				&gdocs.Request{UpdateParagraphStyle: &gdocs.UpdateParagraphStyleRequest{Fields: "namedStyleType",
					ParagraphStyle: &gdocs.ParagraphStyle{NamedStyleType: "NORMAL_TEXT"},
					Range:          &gdocs.Range{StartIndex: h.EndIndex, EndIndex: h.EndIndex + n}}})
		}
	}
	if err := g.api.Call(ctx, what(in.DocumentID), func() error {
		_, err := svc.Documents.BatchUpdate(in.DocumentID, &gdocs.BatchUpdateDocumentRequest{Requests: reqs}).Context(ctx).Do()
		return err
	}); err != nil {
		return nil, err
	}
	return map[string]any{"status": "written", "document_id": in.DocumentID}, nil
}

// findHeading finds the heading paragraph whose text is name (ignoring
// case and spaces); last says it ends the body. It also returns every
// heading's text, for an error.
func findHeading(d *gdocs.Document, name string) (h *gdocs.StructuralElement, last bool, headings []string) {
	want := strings.ToLower(strings.Join(strings.Fields(name), " "))
	content := body(d)
	for i, el := range content {
		if el.Paragraph == nil || heading(el.Paragraph) == 0 {
			continue
		}
		text := strings.TrimSpace(plain(el.Paragraph))
		headings = append(headings, text)
		if h == nil && strings.ToLower(strings.Join(strings.Fields(text), " ")) == want {
			h, last = el, i == len(content)-1
		}
	}
	return h, last, headings
}

func body(d *gdocs.Document) []*gdocs.StructuralElement {
	if d.Body == nil {
		return nil
	}
	return d.Body.Content
}

type replaceIn struct {
	DocumentID string `json:"document_id"`
	Find       string `json:"find"`
	Replace    string `json:"replace" desc:"\"\" deletes the text"`
	MatchCase  bool   `json:"match_case,omitempty"`
}

func (g *group) replace(ctx context.Context, in replaceIn) (any, error) {
	if err := google.Required("document_id", in.DocumentID); err != nil {
		return nil, err
	}
	if in.Find == "" {
		return nil, &tools.Error{Code: tools.CodeMissingParameter, Message: "find is required."}
	}
	res, err := google.Do(ctx, g.api, what(in.DocumentID), func(s *gdocs.Service) (*gdocs.BatchUpdateDocumentResponse, error) {
		return s.Documents.BatchUpdate(in.DocumentID, &gdocs.BatchUpdateDocumentRequest{Requests: []*gdocs.Request{{
			ReplaceAllText: &gdocs.ReplaceAllTextRequest{ReplaceText: in.Replace,
				ContainsText: &gdocs.SubstringMatchCriteria{Text: in.Find, MatchCase: in.MatchCase}}}}}).Context(ctx).Do()
	})
	if err != nil {
		return nil, err
	}
	n := int64(0)
	if len(res.Replies) > 0 && res.Replies[0].ReplaceAllText != nil {
		n = res.Replies[0].ReplaceAllText.OccurrencesChanged
	}
	return map[string]any{"status": "replaced", "occurrences": n}, nil
}

type commentsIn struct {
	DocumentID      string `json:"document_id"`
	IncludeResolved bool   `json:"include_resolved,omitempty"`
}

func (g *group) comments(ctx context.Context, in commentsIn) (any, error) {
	if err := google.Required("document_id", in.DocumentID); err != nil {
		return nil, err
	}
	res, err := google.Do(ctx, g.drive, what(in.DocumentID), func(s *gdrive.Service) (*gdrive.CommentList, error) {
		return s.Comments.List(in.DocumentID).PageSize(100).
			Fields("comments(id,content,author(displayName),createdTime,resolved,quotedFileContent(value),replies(content,author(displayName)))").
			Context(ctx).Do()
	})
	if err != nil {
		return nil, err
	}
	type reply struct {
		Author string `json:"author"`
		Text   string `json:"text"`
	}
	type comment struct {
		ID       string  `json:"id"`
		Author   string  `json:"author"`
		Text     string  `json:"text"`
		On       string  `json:"on,omitempty"`
		Created  string  `json:"created"`
		Resolved bool    `json:"resolved,omitempty"`
		Replies  []reply `json:"replies,omitempty"`
	}
	out := []comment{}
	for _, c := range res.Comments {
		if c.Resolved && !in.IncludeResolved {
			continue
		}
		cm := comment{ID: c.Id, Text: c.Content, Created: c.CreatedTime, Resolved: c.Resolved}
		if c.Author != nil {
			cm.Author = c.Author.DisplayName
		}
		if c.QuotedFileContent != nil {
			cm.On = c.QuotedFileContent.Value
		}
		for _, r := range c.Replies {
			rp := reply{Text: r.Content}
			if r.Author != nil {
				rp.Author = r.Author.DisplayName
			}
			cm.Replies = append(cm.Replies, rp)
		}
		out = append(out, cm)
	}
	return map[string]any{"comments": out}, nil
}
