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
// Schema panics if v is not a struct or embeds one: schemas are built at start-up from
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
		if f.Anonymous {
			// Strict decoding would not see an embedded struct's fields
			// as the schema's: spell them out.
			panic(fmt.Sprintf("tools.Schema: %s embeds %s; list its fields instead", t, f.Type))
		}
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
