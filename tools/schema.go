package tools

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"
)

// Schema derives a JSON Schema object from a struct value. Field rules:
//
//   - the property name comes from the json tag; "-" skips the field;
//   - a field is required unless its json tag has omitempty or it is a pointer;
//   - the desc tag is the property description;
//   - the enum tag is a comma-separated list of allowed string values.
//
// Schema panics if v is not a struct: schemas are built at start-up from
// types in this codebase, so a wrong type is a programming error.
func Schema(v any) json.RawMessage {
	t := reflect.TypeOf(v)
	if t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t.Kind() != reflect.Struct {
		panic(fmt.Sprintf("tools.Schema: %T is not a struct", v))
	}
	b, err := json.Marshal(objectSchema(t))
	if err != nil {
		panic(fmt.Sprintf("tools.Schema: %v", err))
	}
	return b
}

func objectSchema(t reflect.Type) map[string]any {
	props := map[string]any{}
	var required []string
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		p := typeSchema(f.Type)
		if d := f.Tag.Get("desc"); d != "" {
			p["description"] = d
		}
		if e := f.Tag.Get("enum"); e != "" {
			p["enum"] = strings.Split(e, ",")
		}
		props[name] = p
		if !strings.Contains(opts, "omitempty") && f.Type.Kind() != reflect.Pointer {
			required = append(required, name)
		}
	}
	s := map[string]any{"type": "object", "properties": props}
	if len(required) > 0 {
		sort.Strings(required)
		s["required"] = required
	}
	return s
}

func typeSchema(t reflect.Type) map[string]any {
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return map[string]any{"type": "string"}
	case reflect.Bool:
		return map[string]any{"type": "boolean"}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return map[string]any{"type": "integer"}
	case reflect.Float32, reflect.Float64:
		return map[string]any{"type": "number"}
	case reflect.Slice, reflect.Array:
		return map[string]any{"type": "array", "items": typeSchema(t.Elem())}
	case reflect.Struct:
		return objectSchema(t)
	default:
		return map[string]any{}
	}
}

// schemaNode is the subset of JSON Schema the executor checks.
type schemaNode struct {
	Type       any                    `json:"type"`
	Properties map[string]*schemaNode `json:"properties"`
	Required   []string               `json:"required"`
	Enum       []any                  `json:"enum"`
	Items      *schemaNode            `json:"items"`
	// AdditionalProperties false rejects unknown properties.
	AdditionalProperties *bool `json:"additionalProperties"`
}

// compileSchema parses a definition's parameters once, at registration.
func compileSchema(raw json.RawMessage) (*schemaNode, error) {
	if len(raw) == 0 {
		return &schemaNode{Type: "object"}, nil
	}
	var n schemaNode
	if err := json.Unmarshal(raw, &n); err != nil {
		return nil, err
	}
	return &n, nil
}

// check validates a decoded argument value. It returns an *Error naming the
// first problem, with code missing_parameter or invalid_argument.
func (n *schemaNode) check(path string, v any) *Error {
	if n == nil {
		return nil
	}
	if t, ok := n.Type.(string); ok && t != "" && !typeMatches(t, v) {
		return &Error{
			Code:       CodeInvalidArgument,
			Message:    fmt.Sprintf("parameter '%s' must be %s, got %s", display(path), article(t), jsonKind(v)),
			Suggestion: "Fix the argument's type and call the tool again.",
		}
	}
	if len(n.Enum) > 0 {
		ok := false
		for _, e := range n.Enum {
			if e == v {
				ok = true
				break
			}
		}
		if !ok {
			return &Error{
				Code:       CodeInvalidArgument,
				Message:    fmt.Sprintf("parameter '%s' must be one of %s", display(path), enumList(n.Enum)),
				Suggestion: "Use one of the allowed values.",
				Details:    map[string]any{"allowed_values": n.Enum},
			}
		}
	}
	switch val := v.(type) {
	case map[string]any:
		for _, r := range n.Required {
			if x, ok := val[r]; !ok || x == nil {
				return &Error{
					Code:       CodeMissingParameter,
					Message:    fmt.Sprintf("Required parameter '%s' is missing.", join(path, r)),
					Suggestion: "Call the tool again with every required parameter.",
				}
			}
		}
		keys := make([]string, 0, len(val))
		for k := range val {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			p, ok := n.Properties[k]
			if !ok {
				if n.AdditionalProperties != nil && !*n.AdditionalProperties {
					return &Error{Code: CodeInvalidArgument, Message: fmt.Sprintf("unknown parameter '%s'", join(path, k))}
				}
				continue
			}
			if val[k] == nil {
				continue // null is treated as absent
			}
			if err := p.check(join(path, k), val[k]); err != nil {
				return err
			}
		}
	case []any:
		for i, x := range val {
			if err := n.Items.check(fmt.Sprintf("%s[%d]", path, i), x); err != nil {
				return err
			}
		}
	}
	return nil
}

func typeMatches(t string, v any) bool {
	switch t {
	case "object":
		_, ok := v.(map[string]any)
		return ok
	case "array":
		_, ok := v.([]any)
		return ok
	case "string":
		_, ok := v.(string)
		return ok
	case "boolean":
		_, ok := v.(bool)
		return ok
	case "number":
		_, ok := v.(float64)
		return ok
	case "integer":
		f, ok := v.(float64)
		return ok && f == float64(int64(f))
	}
	return true
}

func jsonKind(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case map[string]any:
		return "an object"
	case []any:
		return "an array"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case float64:
		if x == float64(int64(x)) {
			return "an integer"
		}
		return "a number"
	}
	return fmt.Sprintf("%T", v)
}

func article(t string) string {
	switch t {
	case "object", "array", "integer":
		return "an " + t
	}
	return "a " + t
}

func join(path, k string) string {
	if path == "" {
		return k
	}
	return path + "." + k
}

func display(path string) string {
	if path == "" {
		return "(arguments)"
	}
	return path
}

func enumList(vals []any) string {
	parts := make([]string, len(vals))
	for i, v := range vals {
		parts[i] = fmt.Sprint(v)
	}
	return strings.Join(parts, ", ")
}
