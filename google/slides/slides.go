// Package slides is the google_slides tool group: the calling person's
// Google Slides presentations, through the Slides API.
package slides

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"strings"

	gslides "google.golang.org/api/slides/v1"

	"loadout/backoff"
	"loadout/google"
	"loadout/tools"
)

// GroupName is the group's name for load_tool_group.
const GroupName = "google_slides"

// Service is the Slides API as the group asks google.Client for it.
func Service() google.Service {
	return google.Service{Group: GroupName, Path: "slides/", Scopes: []string{gslides.PresentationsScope}}
}

// Options tunes the group. The zero value is the default.
type Options struct {
	// Backoff retries temporary Google errors.
	Backoff backoff.Policy
}

// New returns the google_slides group, its tools and scopes, acting as
// the calling person through c.
func New(c google.Client, o Options) google.Group {
	g := &group{api: google.API[gslides.Service]{Client: c, Service: Service(), New: gslides.NewService, Backoff: o.Backoff}}
	return google.Group{Examples: examples,
		Group: tools.Group{Name: GroupName, DisplayName: "Google Slides",
			Description: "The person's Google Slides: create, read every slide and its speaker notes, add slides, replace text, insert images."},
		Tools: []tools.Tool{
			tools.New(tools.Definition{Name: "slides_create", Description: "Create a presentation."}, g.create),
			tools.New(tools.Definition{Name: "slides_read", Description: "Every slide's text and speaker notes, in order, with their ids.", ReadOnly: true, Untrusted: true}, g.read),
			tools.New(tools.Definition{Name: "slides_add", Description: "Add a slide with a layout, optionally with its title and body text."}, g.add),
			tools.New(tools.Definition{Name: "slides_replace_text", Description: "Find and replace text on every slide."}, g.replace),
			tools.New(tools.Definition{Name: "slides_insert_image", Description: "Put an image from a public https URL on a slide."}, g.image),
		},
		Scopes: Service().Scopes,
	}
}

type group struct {
	api google.API[gslides.Service]
}

func what(id string) string { return fmt.Sprintf("the presentation '%s'", id) }

func link(id string) string { return "https://docs.google.com/presentation/d/" + id + "/edit" }

// newID is an object id for something the group creates.
func newID(prefix string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return prefix + "_" + hex.EncodeToString(b[:])
}

type createIn struct {
	Title string `json:"title"`
}

func (g *group) create(ctx context.Context, in createIn) (any, error) {
	if err := google.Required("title", in.Title); err != nil {
		return nil, err
	}
	p, err := google.DoOnce(ctx, g.api, "the new presentation", func(s *gslides.Service) (*gslides.Presentation, error) {
		return s.Presentations.Create(&gslides.Presentation{Title: strings.TrimSpace(in.Title)}).Context(ctx).Do()
	})
	if err != nil {
		return nil, err
	}
	return map[string]any{"status": "created", "presentation_id": p.PresentationId, "link": link(p.PresentationId), "slides": len(p.Slides)}, nil
}

type idIn struct {
	PresentationID string `json:"presentation_id"`
}

// slide is a slide as slides_read returns it.
type slide struct {
	Index    int    `json:"index"`
	ObjectID string `json:"object_id"`
	Text     string `json:"text,omitempty"`
	Notes    string `json:"notes,omitempty"`
	Skipped  bool   `json:"skipped,omitempty"`
}

func (g *group) read(ctx context.Context, in idIn) (any, error) {
	if err := google.Required("presentation_id", in.PresentationID); err != nil {
		return nil, err
	}
	p, err := google.Do(ctx, g.api, what(in.PresentationID), func(s *gslides.Service) (*gslides.Presentation, error) {
		return s.Presentations.Get(in.PresentationID).Context(ctx).Do()
	})
	if err != nil {
		return nil, err
	}
	out := []slide{}
	for i, s := range p.Slides {
		sl := slide{Index: i + 1, ObjectID: s.ObjectId, Text: pageText(s.PageElements)}
		if sp := s.SlideProperties; sp != nil {
			sl.Skipped = sp.IsSkipped
			if np := sp.NotesPage; np != nil && np.NotesProperties != nil {
				for _, el := range np.PageElements {
					if el.ObjectId == np.NotesProperties.SpeakerNotesObjectId {
						sl.Notes = strings.TrimSpace(shapeText(el.Shape))
					}
				}
			}
		}
		out = append(out, sl)
	}
	return map[string]any{"presentation_id": p.PresentationId, "title": p.Title, "slides": out}, nil
}

// pageText is the text of a slide's shapes, tables and groups, one line
// per paragraph.
func pageText(els []*gslides.PageElement) string {
	var parts []string
	for _, el := range els {
		switch {
		case el.Shape != nil:
			if t := strings.TrimSpace(shapeText(el.Shape)); t != "" {
				parts = append(parts, t)
			}
		case el.Table != nil:
			for _, row := range el.Table.TableRows {
				var cells []string
				for _, c := range row.TableCells {
					cells = append(cells, strings.TrimSpace(textOf(c.Text)))
				}
				parts = append(parts, strings.Join(cells, " | "))
			}
		case el.ElementGroup != nil:
			if t := pageText(el.ElementGroup.Children); t != "" {
				parts = append(parts, t)
			}
		}
	}
	return strings.Join(parts, "\n")
}

func shapeText(s *gslides.Shape) string {
	if s == nil {
		return ""
	}
	return textOf(s.Text)
}

func textOf(t *gslides.TextContent) string {
	if t == nil {
		return ""
	}
	var b strings.Builder
	for _, e := range t.TextElements {
		if e.TextRun != nil {
			b.WriteString(e.TextRun.Content)
		}
	}
	return b.String()
}

type addIn struct {
	PresentationID string `json:"presentation_id"`
	Layout         string `json:"layout,omitempty" enum:"BLANK,TITLE,TITLE_AND_BODY,TITLE_ONLY,SECTION_HEADER,ONE_COLUMN_TEXT,MAIN_POINT,BIG_NUMBER,CAPTION_ONLY,TITLE_AND_TWO_COLUMNS" desc:"default TITLE_AND_BODY"`
	Position       *int64 `json:"position,omitempty" desc:"0-based place among the slides; default last"`
	Title          string `json:"title,omitempty"`
	Body           string `json:"body,omitempty"`
}

func (g *group) add(ctx context.Context, in addIn) (any, error) {
	if err := google.Required("presentation_id", in.PresentationID); err != nil {
		return nil, err
	}
	layout := in.Layout
	if layout == "" {
		layout = "TITLE_AND_BODY"
	}
	slideID := newID("slide")
	create := &gslides.CreateSlideRequest{ObjectId: slideID, SlideLayoutReference: &gslides.LayoutReference{PredefinedLayout: layout}}
	if in.Position != nil {
		create.InsertionIndex, create.ForceSendFields = *in.Position, []string{"InsertionIndex"}
	}
	reqs := []*gslides.Request{{CreateSlide: create}}
	fill := func(placeholder, text string) {
		if text == "" {
			return
		}
		id := newID(strings.ToLower(placeholder))
		create.PlaceholderIdMappings = append(create.PlaceholderIdMappings, &gslides.LayoutPlaceholderIdMapping{
			ObjectId: id, LayoutPlaceholder: &gslides.Placeholder{Type: placeholder}})
		reqs = append(reqs, &gslides.Request{InsertText: &gslides.InsertTextRequest{ObjectId: id, Text: text}})
	}
	// The placeholders the layout's title and body text go in.
	titleType, bodyType := "TITLE", "BODY"
	if layout == "TITLE" {
		titleType, bodyType = "CENTERED_TITLE", "SUBTITLE"
	}
	fill(titleType, in.Title)
	fill(bodyType, in.Body)
	if _, err := google.Do(ctx, g.api, what(in.PresentationID), func(s *gslides.Service) (*gslides.BatchUpdatePresentationResponse, error) {
		return s.Presentations.BatchUpdate(in.PresentationID, &gslides.BatchUpdatePresentationRequest{Requests: reqs}).Context(ctx).Do()
	}); err != nil {
		return nil, err
	}
	return map[string]any{"status": "added", "slide_id": slideID, "layout": layout}, nil
}

type replaceIn struct {
	PresentationID string `json:"presentation_id"`
	Find           string `json:"find"`
	Replace        string `json:"replace"`
	MatchCase      bool   `json:"match_case,omitempty"`
}

func (g *group) replace(ctx context.Context, in replaceIn) (any, error) {
	if err := google.Required("presentation_id", in.PresentationID); err != nil {
		return nil, err
	}
	if in.Find == "" {
		return nil, &tools.Error{Code: tools.CodeMissingParameter, Message: "find is required."}
	}
	res, err := google.Do(ctx, g.api, what(in.PresentationID), func(s *gslides.Service) (*gslides.BatchUpdatePresentationResponse, error) {
		return s.Presentations.BatchUpdate(in.PresentationID, &gslides.BatchUpdatePresentationRequest{Requests: []*gslides.Request{{
			ReplaceAllText: &gslides.ReplaceAllTextRequest{ReplaceText: in.Replace,
				ContainsText: &gslides.SubstringMatchCriteria{Text: in.Find, MatchCase: in.MatchCase}}}}}).Context(ctx).Do()
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

type imageIn struct {
	PresentationID string `json:"presentation_id"`
	SlideID        string `json:"slide_id" desc:"object_id from slides_read"`
	URL            string `json:"url" desc:"public https URL of a PNG, JPEG or GIF" reach:"url"`
}

func (g *group) image(ctx context.Context, in imageIn) (any, error) {
	if err := google.Required("presentation_id", in.PresentationID); err != nil {
		return nil, err
	}
	if err := google.Required("slide_id", in.SlideID); err != nil {
		return nil, err
	}
	if u, err := url.Parse(in.URL); err != nil || u.Scheme != "https" || u.Host == "" {
		return nil, google.Invalid("url", "must be a public https URL (Google fetches it)")
	}
	id := newID("image")
	if _, err := google.Do(ctx, g.api, what(in.PresentationID), func(s *gslides.Service) (*gslides.BatchUpdatePresentationResponse, error) {
		return s.Presentations.BatchUpdate(in.PresentationID, &gslides.BatchUpdatePresentationRequest{Requests: []*gslides.Request{{
			CreateImage: &gslides.CreateImageRequest{ObjectId: id, Url: in.URL,
				ElementProperties: &gslides.PageElementProperties{PageObjectId: in.SlideID}}}}}).Context(ctx).Do()
	}); err != nil {
		return nil, err
	}
	return map[string]any{"status": "inserted", "image_id": id, "slide_id": in.SlideID}, nil
}
