package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/mail"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"loadout/tools"
)

// Limits of what a server may ask the person during one call.
const (
	// maxElicitations is how many questions one call may ask: a server
	// asking more is refused, and the person is asked nothing more.
	maxElicitations = 3
	// maxFields is the most fields one form may have.
	maxFields = 20
	// maxTries is how often one field is asked again after an answer
	// that does not fit it, before the form is cancelled.
	maxTries = 3
	// DefaultElicitationTTL is mcp.elicitation_ttl's default.
	DefaultElicitationTTL = 10 * time.Minute
)

// Actions of an elicitation's answer, as the spec names them.
const (
	actionAccept  = "accept"
	actionDecline = "decline"
	actionCancel  = "cancel"
)

// elicit answers a server's elicitation/create: the question goes to the
// person whose turn made the call that is running (see callOf), in its
// chat, bound to them, with the server's message, then for a form one
// field at a time, each answer checked against the field's schema. What
// the person typed goes back to the server only; the model reads it only
// if the server puts it in the call's result.
func (c *Client) elicit(ctx context.Context, req *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
	call, err := c.callOf(ctx)
	if err != nil {
		return nil, err
	}
	asker, ok := tools.AskerFrom(call.ctx)
	if !ok {
		return nil, errors.New("nobody can be asked on this call (a scheduled run, or no chat)")
	}
	if err := call.admit(); err != nil {
		c.log.Warn("MCP server's question refused", "why", err)
		return nil, err
	}
	// The wait ends when the server gives up, the turn ends, or the
	// question expires.
	qctx, cancel := context.WithTimeout(call.ctx, c.deps.elicitationTTL())
	defer cancel()
	stop := context.AfterFunc(ctx, cancel)
	defer stop()
	p := req.Params
	res, err := c.ask(qctx, asker, p)
	switch {
	case errors.Is(err, tools.ErrAskCancelled), errors.Is(err, tools.ErrNotAnswered), errors.Is(err, context.DeadlineExceeded):
		res = &sdk.ElicitResult{Action: actionCancel}
	case errors.Is(err, tools.ErrNotPrivate):
		return nil, errors.New("the link can only be sent in a private chat, and this call was made in a group")
	case err != nil:
		return nil, err
	}
	if res.Action == actionDecline {
		call.declined()
	}
	return res, nil
}

// ask asks p's question and, for an accepted form, its fields.
func (c *Client) ask(ctx context.Context, asker tools.Asker, p *sdk.ElicitParams) (*sdk.ElicitResult, error) {
	server := c.srv.Name
	msg := tools.Shorten(strings.TrimSpace(p.Message), 1000)
	if p.Mode == "url" || (p.Mode == "" && p.URL != "") {
		u, err := url.Parse(p.URL)
		if err != nil || u.Scheme != "https" || u.Host == "" {
			return nil, fmt.Errorf("the URL must be an https link, got %q", tools.Shorten(p.URL, 200))
		}
		text := fmt.Sprintf("The %s service asks you to open this link:\n%s\n\n%s", server, u.String(), msg)
		ans, err := asker.Ask(ctx, tools.Question{Text: text, Choices: []string{"Done", "Decline"}, Private: true})
		if err != nil {
			return nil, err
		}
		if isChoice(ans, "Done", "1", "yes", "ok") {
			return &sdk.ElicitResult{Action: actionAccept}, nil
		}
		return &sdk.ElicitResult{Action: actionDecline}, nil
	}
	form, err := parseForm(p.RequestedSchema)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, f := range form.fields {
		names = append(names, f.label())
	}
	text := fmt.Sprintf("The %s service asks you:\n%s", server, msg)
	if len(names) > 0 {
		text += "\n\nIt wants: " + strings.Join(names, ", ") + ". Nothing you answer is shown to the assistant unless the service sends it back."
	}
	ans, err := asker.Ask(ctx, tools.Question{Text: text, Choices: []string{"Accept", "Decline", "Cancel"}})
	if err != nil {
		return nil, err
	}
	switch {
	case isChoice(ans, "Accept", "yes", "y"):
	case isChoice(ans, "Decline", "no", "n"):
		return &sdk.ElicitResult{Action: actionDecline}, nil
	default:
		return &sdk.ElicitResult{Action: actionCancel}, nil
	}
	content := map[string]any{}
	for _, f := range form.fields {
		v, ok, err := c.askField(ctx, asker, f)
		if err != nil {
			return nil, err
		}
		if ok {
			content[f.name] = v
		}
	}
	return &sdk.ElicitResult{Action: actionAccept, Content: content}, nil
}

// askField asks one field until its answer fits, at most maxTries times.
// ok is false for an optional field skipped.
func (c *Client) askField(ctx context.Context, asker tools.Asker, f field) (any, bool, error) {
	q := f.question()
	for try := 0; try < maxTries; try++ {
		ans, err := asker.Ask(ctx, q)
		if err != nil {
			return nil, false, err
		}
		ans = strings.TrimSpace(ans)
		if ans == "-" || ans == "" {
			if f.required {
				q.Text = "This one is needed. " + f.question().Text
				continue
			}
			return nil, false, nil
		}
		v, err := f.parse(ans)
		if err == nil {
			return v, true, nil
		}
		q.Text = fmt.Sprintf("That does not fit: %s.\n%s", err, f.question().Text)
	}
	return nil, false, tools.ErrAskCancelled
}

func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}

func isChoice(ans string, words ...string) bool {
	ans = strings.TrimSpace(ans)
	for _, w := range words {
		if strings.EqualFold(ans, w) {
			return true
		}
	}
	return false
}

// form is an elicitation's schema: a flat object of primitive fields, in
// the order the server wrote them.
type form struct{ fields []field }

// field is one property of a form.
type field struct {
	name     string
	required bool
	schema   fieldSchema
}

// option is one value of an enum: what is sent and what is shown.
type option struct {
	value any
	label string
}

type fieldSchema struct {
	Type        string         `json:"type"`
	Title       string         `json:"title"`
	Description string         `json:"description"`
	Format      string         `json:"format"`
	Enum        []any          `json:"enum"`
	EnumNames   []string       `json:"enumNames"`
	OneOf       []constOption  `json:"oneOf"`
	AnyOf       []constOption  `json:"anyOf"`
	Items       *fieldSchema   `json:"items"`
	Default     any            `json:"default"`
	Minimum     *float64       `json:"minimum"`
	Maximum     *float64       `json:"maximum"`
	MinLength   *int           `json:"minLength"`
	MaxLength   *int           `json:"maxLength"`
	MinItems    *int           `json:"minItems"`
	MaxItems    *int           `json:"maxItems"`
	Properties  map[string]any `json:"properties"`
	Ref         string         `json:"$ref"`
}

type constOption struct {
	Const any    `json:"const"`
	Title string `json:"title"`
}

// parseForm reads a requested schema. It refuses what cannot be asked
// one field at a time: nested objects, arrays of anything but choices,
// references, more than maxFields fields.
func parseForm(schema any) (form, error) {
	if schema == nil {
		return form{}, nil
	}
	raw, err := json.Marshal(schema)
	if err != nil {
		return form{}, fmt.Errorf("unreadable schema: %w", err)
	}
	var top struct {
		Type       string          `json:"type"`
		Properties json.RawMessage `json:"properties"`
		Required   []string        `json:"required"`
	}
	if err := json.Unmarshal(raw, &top); err != nil {
		return form{}, fmt.Errorf("unreadable schema: %w", err)
	}
	if top.Type != "" && top.Type != "object" {
		return form{}, fmt.Errorf("the schema must be an object, not %q", top.Type)
	}
	names, err := orderedKeys(top.Properties)
	if err != nil {
		return form{}, err
	}
	if len(names) > maxFields {
		return form{}, fmt.Errorf("a form of %d fields is more than loadout asks a person (at most %d)", len(names), maxFields)
	}
	var props map[string]fieldSchema
	if len(top.Properties) > 0 {
		if err := json.Unmarshal(top.Properties, &props); err != nil {
			return form{}, fmt.Errorf("unreadable schema properties: %w", err)
		}
	}
	var f form
	for _, n := range names {
		s := props[n]
		fd := field{name: n, required: slices.Contains(top.Required, n), schema: s}
		if err := fd.check(); err != nil {
			return form{}, fmt.Errorf("field %q: %w", n, err)
		}
		f.fields = append(f.fields, fd)
	}
	// Required fields first. (The order a server wrote is kept where it
	// arrives; the SDK hands the schema over as a map, which sorts it.)
	slices.SortStableFunc(f.fields, func(a, b field) int { return cmpBool(b.required, a.required) })
	return f, nil
}

// orderedKeys are an object's keys in the order written.
func orderedKeys(obj json.RawMessage) ([]string, error) {
	if len(bytes.TrimSpace(obj)) == 0 || string(bytes.TrimSpace(obj)) == "null" {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(obj))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, errors.New("schema properties must be an object")
	}
	var keys []string
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("unreadable schema properties: %w", err)
		}
		k, _ := t.(string)
		keys = append(keys, k)
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return nil, fmt.Errorf("unreadable schema properties: %w", err)
		}
	}
	return keys, nil
}

// check refuses a field that cannot be asked as a plain answer.
func (f field) check() error {
	s := f.schema
	switch {
	case len(s.Properties) > 0 || s.Type == "object":
		return errors.New("nested objects cannot be asked in a chat")
	case s.Ref != "":
		return errors.New("references cannot be asked in a chat")
	}
	switch s.Type {
	case "string", "integer", "number", "boolean":
		return nil
	case "array":
		if s.Items == nil || len(f.itemOptions()) == 0 {
			return errors.New("only arrays of choices can be asked in a chat")
		}
		return nil
	}
	return fmt.Errorf("type %q cannot be asked in a chat", s.Type)
}

// options are a single choice's values.
func (f field) options() []option {
	return optionsOf(f.schema)
}

// itemOptions are a multiple choice's values.
func (f field) itemOptions() []option {
	if f.schema.Items == nil {
		return nil
	}
	return optionsOf(*f.schema.Items)
}

func optionsOf(s fieldSchema) []option {
	var out []option
	for i, v := range s.Enum {
		label := fmt.Sprint(v)
		if i < len(s.EnumNames) && s.EnumNames[i] != "" {
			label = s.EnumNames[i]
		}
		out = append(out, option{v, label})
	}
	for _, o := range append(slices.Clone(s.OneOf), s.AnyOf...) {
		label := o.Title
		if label == "" {
			label = fmt.Sprint(o.Const)
		}
		out = append(out, option{o.Const, label})
	}
	return out
}

func (f field) label() string {
	l := f.schema.Title
	if l == "" {
		l = f.name
	}
	if f.required {
		l += " (required)"
	}
	return l
}

// question is what the person reads for the field.
func (f field) question() tools.Question {
	s := f.schema
	var b strings.Builder
	b.WriteString(f.label())
	if s.Description != "" {
		b.WriteString(": " + tools.Shorten(s.Description, 300))
	}
	var choices []string
	switch {
	case s.Type == "boolean":
		choices = []string{"Yes", "No"}
	case s.Type == "array":
		for _, o := range f.itemOptions() {
			choices = append(choices, o.label)
		}
		b.WriteString("\n(Several may be chosen: separate them with commas.)")
	default:
		for _, o := range f.options() {
			choices = append(choices, o.label)
		}
	}
	switch s.Type {
	case "integer":
		b.WriteString("\n(A whole number" + bounds(s) + ".)")
	case "number":
		b.WriteString("\n(A number" + bounds(s) + ".)")
	case "string":
		if s.Format != "" && len(choices) == 0 {
			b.WriteString("\n(Format: " + s.Format + ".)")
		}
	}
	if !f.required {
		b.WriteString("\nOptional: send - to skip")
		if s.Default != nil {
			fmt.Fprintf(&b, " (the service then uses %v)", s.Default)
		}
		b.WriteString(".")
	}
	return tools.Question{Text: b.String(), Choices: choices}
}

func bounds(s fieldSchema) string {
	switch {
	case s.Minimum != nil && s.Maximum != nil:
		return fmt.Sprintf(" from %v to %v", *s.Minimum, *s.Maximum)
	case s.Minimum != nil:
		return fmt.Sprintf(", at least %v", *s.Minimum)
	case s.Maximum != nil:
		return fmt.Sprintf(", at most %v", *s.Maximum)
	}
	return ""
}

// parse checks an answer against the field's schema and returns the
// value to send.
func (f field) parse(ans string) (any, error) {
	s := f.schema
	if s.Type == "array" {
		opts := f.itemOptions()
		var out []any
		for _, part := range strings.Split(ans, ",") {
			v, ok := pick(opts, strings.TrimSpace(part))
			if !ok {
				return nil, fmt.Errorf("%q is not one of the choices", strings.TrimSpace(part))
			}
			if !slices.Contains(out, v) {
				out = append(out, v)
			}
		}
		if s.MinItems != nil && len(out) < *s.MinItems {
			return nil, fmt.Errorf("choose at least %d", *s.MinItems)
		}
		if s.MaxItems != nil && len(out) > *s.MaxItems {
			return nil, fmt.Errorf("choose at most %d", *s.MaxItems)
		}
		return out, nil
	}
	if opts := f.options(); len(opts) > 0 {
		v, ok := pick(opts, ans)
		if !ok {
			return nil, errors.New("choose one of the choices")
		}
		return v, nil
	}
	switch s.Type {
	case "boolean":
		switch strings.ToLower(ans) {
		case "yes", "y", "true", "1":
			return true, nil
		case "no", "n", "false", "2":
			return false, nil
		}
		return nil, errors.New("answer yes or no")
	case "integer", "number":
		n, err := strconv.ParseFloat(strings.ReplaceAll(ans, ",", "."), 64)
		if err != nil {
			return nil, errors.New("that is not a number")
		}
		if s.Type == "integer" && n != float64(int64(n)) {
			return nil, errors.New("a whole number is needed")
		}
		if s.Minimum != nil && n < *s.Minimum || s.Maximum != nil && n > *s.Maximum {
			return nil, fmt.Errorf("the number must be%s", bounds(s))
		}
		if s.Type == "integer" {
			return int64(n), nil
		}
		return n, nil
	}
	n := len([]rune(ans))
	if s.MinLength != nil && n < *s.MinLength {
		return nil, fmt.Errorf("at least %d characters are needed", *s.MinLength)
	}
	if s.MaxLength != nil && n > *s.MaxLength {
		return nil, fmt.Errorf("at most %d characters are allowed", *s.MaxLength)
	}
	switch s.Format {
	case "email":
		if a, err := mail.ParseAddress(ans); err != nil || a.Address != ans {
			return nil, errors.New("that is not an e-mail address")
		}
	case "uri":
		if u, err := url.Parse(ans); err != nil || u.Scheme == "" || u.Host == "" {
			return nil, errors.New("that is not a full web address (https://…)")
		}
	case "date":
		if _, err := time.Parse(time.DateOnly, ans); err != nil {
			return nil, errors.New("write the date as 2006-01-31")
		}
	case "date-time":
		if _, err := time.Parse(time.RFC3339, ans); err != nil {
			return nil, errors.New("write the time as 2006-01-31T15:04:05Z")
		}
	}
	return ans, nil
}

// pick finds an answer among the options: by its number (from 1), its
// label or its value.
func pick(opts []option, ans string) (any, bool) {
	if n, err := strconv.Atoi(ans); err == nil && n >= 1 && n <= len(opts) {
		return opts[n-1].value, true
	}
	for _, o := range opts {
		if strings.EqualFold(o.label, ans) || strings.EqualFold(fmt.Sprint(o.value), ans) {
			return o.value, true
		}
	}
	return nil, false
}
