package tools

import (
	"bytes"
	stdjson "encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// Input is a call's arguments, checked and decoded once. Everything about
// the call comes from it: its effect, the summary a person approves, the
// form stored while it waits, and the run.
type Input struct {
	// Value is what Run, EffectFor and Summarize get: the typed input of
	// a tool made with New, the checked JSON object (json.RawMessage) of
	// one made with Raw.
	Value any
	// JSON is Value encoded again: the form stored with a held call and
	// run once it is approved, and the form compared to find a failing
	// call repeated.
	JSON string
}

// strictOptions decode JSON into a Go value the way tool arguments must
// be read: names match exactly (no case folding), a name the type does
// not have is refused, a name given twice is refused, nothing may follow
// the value, and a number in an interface keeps its exact text
// (encoding/json's Number) instead of becoming a float64.
var strictOptions = json.JoinOptions(
	json.RejectUnknownMembers(true),
	json.WithUnmarshalers(json.UnmarshalFromFunc(func(dec *jsontext.Decoder, v *any) error {
		if dec.PeekKind() != '0' {
			return errors.ErrUnsupported // the default decoding
		}
		tok, err := dec.ReadToken()
		if err != nil {
			return err
		}
		*v = stdjson.Number(tok.String())
		return nil
	})),
)

// Strict decodes data into v strictly (see strictOptions). A failure is
// an *Error with code invalid_argument naming the parameter.
func Strict(data []byte, v any) error {
	if err := json.Unmarshal(data, v, strictOptions); err != nil {
		return &Error{
			Code:       CodeInvalidArgument,
			Message:    "The arguments do not match the schema: " + decodeMessage(err),
			Suggestion: "Check the parameter names and types against the tool's schema and call it again.",
		}
	}
	return nil
}

// decodeMessage is a decoding error in the model's terms: the parameter
// it is about and what is wrong, without Go type names.
func decodeMessage(err error) string {
	var se *json.SemanticError
	if errors.As(err, &se) {
		where := strings.ReplaceAll(strings.TrimPrefix(string(se.JSONPointer), "/"), "/", ".")
		if where == "" {
			where = "(arguments)"
		}
		if errors.Is(se.Err, json.ErrUnknownName) {
			return fmt.Sprintf("unknown parameter '%s'", where)
		}
		kind := ""
		if se.JSONKind != 0 {
			kind = " (got " + kindName(se.JSONKind) + ")"
		}
		return fmt.Sprintf("parameter '%s' has the wrong type%s", where, kind)
	}
	var syn *jsontext.SyntacticError
	if errors.As(err, &syn) {
		return syn.Err.Error()
	}
	return err.Error()
}

// decodeInput checks a call's arguments against s and decodes them once
// into t's input. The checked text is refused when it is not one JSON
// object, repeats a name (in any letter case, as strings.EqualFold
// compares, unless the schema names both), names a property the schema does not have (unless t is Open or
// the schema allows more), or breaks the schema's types, enums or
// required list.
func decodeInput(t Tool, s *schemaNode, text string) (Input, *Error) {
	text = strings.TrimSpace(text)
	if text == "" {
		text = "{}"
	}
	raw := []byte(text)
	// The checker names a repeated parameter itself, in any letter case.
	dec := jsontext.NewDecoder(bytes.NewReader(raw), jsontext.AllowDuplicateNames(true))
	if k := dec.PeekKind(); k != '{' && k != 0 {
		return Input{}, &Error{
			Code:       CodeInvalidArgument,
			Message:    fmt.Sprintf("The arguments for '%s' must be an object, got %s.", t.Name, kindName(k)),
			Suggestion: "Send the arguments as one JSON object that matches the tool's schema.",
		}
	}
	c := checker{open: t.Open}
	if err := c.value(dec, s, ""); err != nil {
		var te *Error
		if errors.As(err, &te) {
			return Input{}, te
		}
		return Input{}, &Error{
			Code:       CodeInvalidArgument,
			Message:    fmt.Sprintf("The arguments for '%s' are not valid JSON: %s", t.Name, decodeMessage(err)),
			Suggestion: "Send the arguments as one JSON object that matches the tool's schema.",
		}
	}
	if _, err := dec.ReadToken(); err != io.EOF {
		return Input{}, &Error{
			Code:       CodeInvalidArgument,
			Message:    fmt.Sprintf("The arguments for '%s' are not valid JSON: something follows the object.", t.Name),
			Suggestion: "Send the arguments as one JSON object and nothing after it.",
		}
	}
	if t.Decode == nil {
		v := jsontext.Value(raw)
		if err := v.Compact(); err != nil {
			return Input{}, &Error{Code: CodeInvalidArgument, Message: decodeMessage(err)}
		}
		return Input{Value: stdjson.RawMessage(v), JSON: string(v)}, nil
	}
	in, err := t.Decode(raw)
	if err != nil {
		var te *Error
		if errors.As(err, &te) {
			return Input{}, te
		}
		return Input{}, &Error{Code: CodeInvalidArgument, Message: err.Error()}
	}
	// encoding/json encodes again: it writes a Number as the number it
	// holds, where json/v2 would quote it.
	b, err := stdjson.Marshal(in)
	if err != nil {
		return Input{}, &Error{Code: CodeInvalidArgument, Message: "The arguments cannot be stored: " + err.Error()}
	}
	return Input{Value: in, JSON: string(b)}, nil
}

// checker walks the arguments' tokens once against the schema.
type checker struct {
	open bool
}

func (c checker) value(dec *jsontext.Decoder, n *schemaNode, path string) error {
	kind := dec.PeekKind()
	if kind == 0 {
		_, err := dec.ReadToken() // the syntax error, or EOF
		if err == nil {
			err = errors.New("unexpected end")
		}
		return err
	}
	if n != nil {
		if t, ok := n.Type.(string); ok && t != "" && !kindMatches(t, kind) {
			return &Error{
				Code:       CodeInvalidArgument,
				Message:    fmt.Sprintf("parameter '%s' must be %s, got %s", display(path), article(t), kindName(kind)),
				Suggestion: "Fix the argument's type and call the tool again.",
			}
		}
	}
	switch kind {
	case '{':
		return c.object(dec, n, path)
	case '[':
		if _, err := dec.ReadToken(); err != nil {
			return err
		}
		var items *schemaNode
		if n != nil {
			items = n.Items
		}
		for i := 0; dec.PeekKind() != ']'; i++ {
			if dec.PeekKind() == 0 {
				_, err := dec.ReadToken()
				return err
			}
			if err := c.value(dec, items, fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
		_, err := dec.ReadToken()
		return err
	}
	tok, err := dec.ReadToken()
	if err != nil {
		return err
	}
	if n == nil {
		return nil
	}
	if t, ok := n.Type.(string); ok && t == "integer" && !isInteger(tok.String()) {
		return &Error{
			Code:       CodeInvalidArgument,
			Message:    fmt.Sprintf("parameter '%s' must be an integer, got a number", display(path)),
			Suggestion: "Fix the argument's type and call the tool again.",
		}
	}
	if len(n.Enum) > 0 && !inEnum(n.Enum, kind, tok) {
		return &Error{
			Code:       CodeInvalidArgument,
			Message:    fmt.Sprintf("parameter '%s' must be one of %s", display(path), enumList(n.Enum)),
			Suggestion: "Use one of the allowed values.",
			Details:    map[string]any{"allowed_values": n.Enum},
		}
	}
	return nil
}

func (c checker) object(dec *jsontext.Decoder, n *schemaNode, path string) error {
	if _, err := dec.ReadToken(); err != nil {
		return err
	}
	present := map[string]bool{}
	folded := map[string]string{}
	for dec.PeekKind() != '}' {
		tok, err := dec.ReadToken()
		if err != nil {
			return err
		}
		k := tok.String()
		var p *schemaNode
		declared := false
		if n != nil {
			p, declared = n.Properties[k]
		}
		low := fold(k)
		if other, ok := folded[low]; ok {
			if other == k || !n.declares(other, k) {
				return &Error{
					Code:       CodeInvalidArgument,
					Message:    fmt.Sprintf("parameter '%s' is given twice ('%s' and '%s')", join(path, k), other, k),
					Suggestion: "Give each parameter once, spelled exactly as in the schema.",
				}
			}
		}
		folded[low] = k
		if !declared && n != nil && n.closed(c.open) {
			return &Error{
				Code:       CodeInvalidArgument,
				Message:    fmt.Sprintf("unknown parameter '%s'", join(path, k)),
				Suggestion: "Use only the parameters in the tool's schema, spelled exactly as there.",
			}
		}
		if dec.PeekKind() == 'n' {
			// null is treated as absent
			if _, err := dec.ReadToken(); err != nil {
				return err
			}
			continue
		}
		present[k] = true
		if err := c.value(dec, p, join(path, k)); err != nil {
			return err
		}
	}
	if _, err := dec.ReadToken(); err != nil {
		return err
	}
	if n != nil {
		for _, r := range n.Required {
			if !present[r] {
				return &Error{
					Code:       CodeMissingParameter,
					Message:    fmt.Sprintf("Required parameter '%s' is missing.", join(path, r)),
					Suggestion: "Call the tool again with every required parameter.",
				}
			}
		}
	}
	return nil
}

// fold is name folded as strings.EqualFold folds it (Unicode simple case
// folding, where ſ is s and the Kelvin sign k): two names are one name in
// other letter cases exactly when their folds are equal. A server's
// case-insensitive decoder may take either for the other, so they count
// as the same name given twice.
func fold(name string) string {
	var b strings.Builder
	b.Grow(len(name))
	for _, r := range name {
		least := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			least = min(least, f)
		}
		b.WriteRune(least)
	}
	return b.String()
}

// closed reports whether an object node refuses properties it does not
// name: one that names none is a free-form map; one that says
// additionalProperties decides by it; otherwise only an open tool takes
// them.
func (n *schemaNode) closed(open bool) bool {
	switch {
	case n.Properties == nil:
		return n.AdditionalProperties != nil && !*n.AdditionalProperties
	case n.AdditionalProperties != nil:
		return !*n.AdditionalProperties
	}
	return !open
}

// declares reports whether the schema names both a and b: two
// properties that differ only in letter case are then both allowed.
func (n *schemaNode) declares(a, b string) bool {
	if n == nil || a == b {
		return false
	}
	_, okA := n.Properties[a]
	_, okB := n.Properties[b]
	return okA && okB
}

func kindMatches(t string, k jsontext.Kind) bool {
	switch t {
	case "object":
		return k == '{'
	case "array":
		return k == '['
	case "string":
		return k == '"'
	case "boolean":
		return k == 't' || k == 'f'
	case "number", "integer":
		return k == '0'
	case "null":
		return k == 'n'
	}
	return true
}

func kindName(k jsontext.Kind) string {
	switch k {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case '0':
		return "a number"
	case 'n':
		return "null"
	}
	return "nothing"
}

// isInteger reports whether a JSON number's text is a whole number,
// exactly, however large (1e3, 1.50e1 and 100e-2 are; 1.5 and 1e-3 are
// not),
// reading the text once: no conversion whose cost grows with the
// exponent.
func isInteger(s string) bool {
	mant, exp, _ := strings.Cut(strings.ToLower(s), "e")
	whole, frac, _ := strings.Cut(strings.TrimPrefix(mant, "-"), ".")
	frac = strings.TrimRight(frac, "0")
	if strings.Trim(whole+frac, "0") == "" {
		return true // zero, whatever its exponent
	}
	if frac == "" && exp == "" {
		return true
	}
	e, err := strconv.Atoi(strings.TrimPrefix(exp, "+"))
	if exp == "" {
		e, err = 0, nil
	}
	if err != nil {
		// An exponent beyond int: huge wholes are integers, tiny
		// fractions are not.
		return !strings.HasPrefix(exp, "-")
	}
	digits := whole + frac
	zeros := len(digits) - len(strings.TrimRight(digits, "0"))
	return e-len(frac)+zeros >= 0
}

// inEnum reports whether a scalar token is one of the allowed values.
func inEnum(vals []any, kind jsontext.Kind, tok jsontext.Token) bool {
	for _, e := range vals {
		switch x := e.(type) {
		case string:
			if kind == '"' && tok.String() == x {
				return true
			}
		case bool:
			if (kind == 't' && x) || (kind == 'f' && !x) {
				return true
			}
		case float64:
			if f, err := tok.Float(); kind == '0' && err == nil && f == x {
				return true
			}
		}
	}
	return false
}
