// Package forms is the google_forms tool group: the calling person's
// Google Forms and their responses, through the Forms API.
package forms

import (
	"context"
	"fmt"
	"strings"

	gforms "google.golang.org/api/forms/v1"

	"loadout/backoff"
	"loadout/google"
	"loadout/tools"
)

// GroupName is the group's name for load_tool_group.
const GroupName = "google_forms"

// Service is the Forms API as the group asks google.Client for it.
func Service() google.Service {
	return google.Service{Group: GroupName, Path: "forms/", Scopes: []string{gforms.FormsBodyScope, gforms.FormsResponsesReadonlyScope}}
}

// Options tunes the group. The zero value is the default.
type Options struct {
	// Backoff retries temporary Google errors.
	Backoff backoff.Policy
}

// New returns the google_forms group, its tools and scopes, acting as the
// calling person through c.
func New(c google.Client, o Options) google.Group {
	g := &group{api: google.API[gforms.Service]{Client: c, Service: Service(), New: gforms.NewService, Backoff: o.Backoff}}
	return google.Group{Examples: examples,
		Group: tools.Group{Name: GroupName, DisplayName: "Google Forms",
			Description: "The person's Google Forms: create, read the questions, add questions, read the responses."},
		Tools: []tools.Tool{
			tools.New(tools.Definition{Name: "forms_create", Description: "Create a form with a title and optional description."}, g.create),
			tools.New(tools.Definition{Name: "forms_read", Description: "A form's title, description, link for respondents and its questions.", ReadOnly: true, Untrusted: true}, g.read),
			tools.New(tools.Definition{Name: "forms_add_questions", Description: "Add questions to a form: text, paragraph, choice, checkbox, dropdown, scale or date."}, g.add),
			tools.New(tools.Definition{Name: "forms_responses", Description: "List a form's responses, each with its answers by question, a page at a time.", ReadOnly: true, Untrusted: true}, g.responses),
			tools.New(tools.Definition{Name: "forms_response", Description: "One response of a form with its answers by question.", ReadOnly: true, Untrusted: true}, g.response),
		},
		Scopes: Service().Scopes,
	}
}

type group struct {
	api google.API[gforms.Service]
}

func what(id string) string { return fmt.Sprintf("the form '%s'", id) }

type createIn struct {
	Title       string `json:"title"`
	Description string `json:"description,omitempty"`
}

func (g *group) create(ctx context.Context, in createIn) (any, error) {
	if err := google.Required("title", in.Title); err != nil {
		return nil, err
	}
	svc, err := g.api.Connect(ctx)
	if err != nil {
		return nil, err
	}
	title := strings.TrimSpace(in.Title)
	var f *gforms.Form
	if err := g.api.CallOnce(ctx, "the new form", func() (err error) {
		f, err = svc.Forms.Create(&gforms.Form{Info: &gforms.Info{Title: title, DocumentTitle: title}}).Context(ctx).Do()
		return err
	}); err != nil {
		return nil, err
	}
	if in.Description != "" {
		// The description can only be set once the form exists.
		req := &gforms.BatchUpdateFormRequest{Requests: []*gforms.Request{{UpdateFormInfo: &gforms.UpdateFormInfoRequest{
			Info: &gforms.Info{Description: in.Description}, UpdateMask: "description"}}}}
		if err := g.api.Call(ctx, what(f.FormId), func() error {
			_, err := svc.Forms.BatchUpdate(f.FormId, req).Context(ctx).Do()
			return err
		}); err != nil {
			return nil, err
		}
	}
	return map[string]any{"status": "created", "form_id": f.FormId, "responder_link": f.ResponderUri,
		"edit_link": "https://docs.google.com/forms/d/" + f.FormId + "/edit"}, nil
}

type idIn struct {
	FormID string `json:"form_id"`
}

// question is a question as tools return it.
type question struct {
	ItemID     string   `json:"item_id"`
	QuestionID string   `json:"question_id"`
	Title      string   `json:"title"`
	Kind       string   `json:"kind"`
	Options    []string `json:"options,omitempty"`
	Required   bool     `json:"required,omitempty"`
}

// get fetches a form through svc, which a tool builds once for all its
// requests.
func (g *group) get(ctx context.Context, svc *gforms.Service, id string) (*gforms.Form, error) {
	var f *gforms.Form
	err := g.api.Call(ctx, what(id), func() (err error) {
		f, err = svc.Forms.Get(id).Context(ctx).Do()
		return err
	})
	return f, err
}

func (g *group) read(ctx context.Context, in idIn) (any, error) {
	if err := google.Required("form_id", in.FormID); err != nil {
		return nil, err
	}
	f, err := google.Do(ctx, g.api, what(in.FormID), func(s *gforms.Service) (*gforms.Form, error) {
		return s.Forms.Get(in.FormID).Context(ctx).Do()
	})
	if err != nil {
		return nil, err
	}
	out := map[string]any{"form_id": f.FormId, "responder_link": f.ResponderUri, "questions": questions(f)}
	if f.Info != nil {
		out["title"], out["description"] = f.Info.Title, f.Info.Description
	}
	return out, nil
}

// questions lists a form's questions in order.
func questions(f *gforms.Form) []question {
	out := []question{}
	for _, it := range f.Items {
		if it.QuestionItem == nil || it.QuestionItem.Question == nil {
			continue
		}
		q := it.QuestionItem.Question
		qq := question{ItemID: it.ItemId, QuestionID: q.QuestionId, Title: it.Title, Kind: kindOf(q), Required: q.Required}
		if q.ChoiceQuestion != nil {
			for _, o := range q.ChoiceQuestion.Options {
				if o.IsOther {
					qq.Options = append(qq.Options, "(other)")
				} else {
					qq.Options = append(qq.Options, o.Value)
				}
			}
		}
		out = append(out, qq)
	}
	return out
}

func kindOf(q *gforms.Question) string {
	switch {
	case q.TextQuestion != nil && q.TextQuestion.Paragraph:
		return "paragraph"
	case q.TextQuestion != nil:
		return "text"
	case q.ChoiceQuestion != nil:
		return map[string]string{"RADIO": "choice", "CHECKBOX": "checkbox", "DROP_DOWN": "dropdown"}[q.ChoiceQuestion.Type]
	case q.ScaleQuestion != nil:
		return "scale"
	case q.DateQuestion != nil:
		return "date"
	case q.TimeQuestion != nil:
		return "time"
	case q.RatingQuestion != nil:
		return "rating"
	case q.FileUploadQuestion != nil:
		return "file"
	}
	return "other"
}

type newQuestion struct {
	Title    string   `json:"title"`
	Kind     string   `json:"kind" enum:"text,paragraph,choice,checkbox,dropdown,scale,date"`
	Options  []string `json:"options,omitempty" desc:"for choice, checkbox and dropdown"`
	Required bool     `json:"required,omitempty"`
}

type addIn struct {
	FormID    string        `json:"form_id"`
	Questions []newQuestion `json:"questions"`
	Index     *int64        `json:"index,omitempty" desc:"0-based place of the first; default after the last"`
}

func (g *group) add(ctx context.Context, in addIn) (any, error) {
	if err := google.Required("form_id", in.FormID); err != nil {
		return nil, err
	}
	if len(in.Questions) == 0 {
		return nil, &tools.Error{Code: tools.CodeMissingParameter, Message: "questions needs at least one question."}
	}
	// Every question is checked before anything is asked of Google.
	var reqs []*gforms.Request
	for i, nq := range in.Questions {
		q, err := toQuestion(i, nq)
		if err != nil {
			return nil, err
		}
		reqs = append(reqs, &gforms.Request{CreateItem: &gforms.CreateItemRequest{
			Item: &gforms.Item{Title: strings.TrimSpace(nq.Title), QuestionItem: &gforms.QuestionItem{Question: q}}}})
	}
	svc, err := g.api.Connect(ctx)
	if err != nil {
		return nil, err
	}
	var at int64
	if in.Index != nil {
		at = *in.Index
	} else {
		// After the last item: the form's current length.
		f, err := g.get(ctx, svc, in.FormID)
		if err != nil {
			return nil, err
		}
		at = int64(len(f.Items))
	}
	for i, r := range reqs {
		r.CreateItem.Location = &gforms.Location{Index: at + int64(i), ForceSendFields: []string{"Index"}}
	}
	var res *gforms.BatchUpdateFormResponse
	if err := g.api.Call(ctx, what(in.FormID), func() (err error) {
		res, err = svc.Forms.BatchUpdate(in.FormID, &gforms.BatchUpdateFormRequest{Requests: reqs}).Context(ctx).Do()
		return err
	}); err != nil {
		return nil, err
	}
	var ids []string
	for _, r := range res.Replies {
		if r.CreateItem != nil {
			ids = append(ids, r.CreateItem.ItemId)
		}
	}
	return map[string]any{"status": "added", "item_ids": ids}, nil
}

// toQuestion builds the i-th new question.
func toQuestion(i int, nq newQuestion) (*gforms.Question, error) {
	param := fmt.Sprintf("questions[%d]", i)
	if strings.TrimSpace(nq.Title) == "" {
		return nil, google.Invalid(param+".title", "is empty")
	}
	q := &gforms.Question{Required: nq.Required}
	switch nq.Kind {
	case "text", "paragraph":
		q.TextQuestion = &gforms.TextQuestion{Paragraph: nq.Kind == "paragraph"}
	case "choice", "checkbox", "dropdown":
		if len(nq.Options) == 0 {
			return nil, google.Invalid(param+".options", "needs at least one option for a "+nq.Kind+" question")
		}
		cq := &gforms.ChoiceQuestion{Type: map[string]string{"choice": "RADIO", "checkbox": "CHECKBOX", "dropdown": "DROP_DOWN"}[nq.Kind]}
		for _, o := range nq.Options {
			cq.Options = append(cq.Options, &gforms.Option{Value: o})
		}
		q.ChoiceQuestion = cq
	case "scale":
		q.ScaleQuestion = &gforms.ScaleQuestion{Low: 1, High: 5}
	case "date":
		q.DateQuestion = &gforms.DateQuestion{IncludeYear: true}
	default:
		return nil, google.Invalid(param+".kind", "must be text, paragraph, choice, checkbox, dropdown, scale or date")
	}
	return q, nil
}

// response is a response as tools return it: answers by question title.
type response struct {
	ID        string            `json:"response_id"`
	Submitted string            `json:"submitted"`
	Email     string            `json:"email,omitempty"`
	Answers   map[string]string `json:"answers"`
}

func toResponse(r *gforms.FormResponse, titles map[string]string) response {
	out := response{ID: r.ResponseId, Submitted: r.LastSubmittedTime, Email: r.RespondentEmail, Answers: map[string]string{}}
	for qid, a := range r.Answers {
		title := titles[qid]
		if title == "" {
			title = qid
		}
		var vals []string
		if a.TextAnswers != nil {
			for _, v := range a.TextAnswers.Answers {
				vals = append(vals, v.Value)
			}
		}
		if a.FileUploadAnswers != nil {
			for _, f := range a.FileUploadAnswers.Answers {
				vals = append(vals, "[file "+f.FileName+"]")
			}
		}
		out.Answers[title] = strings.Join(vals, ", ")
	}
	return out
}

// titles maps a form's question ids to their titles.
func (g *group) titles(ctx context.Context, svc *gforms.Service, id string) (map[string]string, error) {
	f, err := g.get(ctx, svc, id)
	if err != nil {
		return nil, err
	}
	m := map[string]string{}
	for _, q := range questions(f) {
		m[q.QuestionID] = q.Title
	}
	return m, nil
}

type responsesIn struct {
	FormID    string `json:"form_id"`
	PageToken string `json:"page_token,omitempty"`
}

func (g *group) responses(ctx context.Context, in responsesIn) (any, error) {
	if err := google.Required("form_id", in.FormID); err != nil {
		return nil, err
	}
	svc, err := g.api.Connect(ctx)
	if err != nil {
		return nil, err
	}
	titles, err := g.titles(ctx, svc, in.FormID)
	if err != nil {
		return nil, err
	}
	var res *gforms.ListFormResponsesResponse
	if err := g.api.Call(ctx, what(in.FormID), func() (err error) {
		c := svc.Forms.Responses.List(in.FormID).PageSize(50).Context(ctx)
		if in.PageToken != "" {
			c = c.PageToken(in.PageToken)
		}
		res, err = c.Do()
		return err
	}); err != nil {
		return nil, err
	}
	out := []response{}
	for _, r := range res.Responses {
		out = append(out, toResponse(r, titles))
	}
	m := map[string]any{"responses": out}
	if res.NextPageToken != "" {
		m["next_page_token"] = res.NextPageToken
	}
	return m, nil
}

type responseIn struct {
	FormID     string `json:"form_id"`
	ResponseID string `json:"response_id"`
}

func (g *group) response(ctx context.Context, in responseIn) (any, error) {
	if err := google.Required("form_id", in.FormID); err != nil {
		return nil, err
	}
	if err := google.Required("response_id", in.ResponseID); err != nil {
		return nil, err
	}
	svc, err := g.api.Connect(ctx)
	if err != nil {
		return nil, err
	}
	titles, err := g.titles(ctx, svc, in.FormID)
	if err != nil {
		return nil, err
	}
	var r *gforms.FormResponse
	if err := g.api.Call(ctx, fmt.Sprintf("the response '%s'", in.ResponseID), func() (err error) {
		r, err = svc.Forms.Responses.Get(in.FormID, in.ResponseID).Context(ctx).Do()
		return err
	}); err != nil {
		return nil, err
	}
	return toResponse(r, titles), nil
}
