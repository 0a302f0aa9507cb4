package bridge

import (
	"fmt"
	"reflect"
	"strings"
)

// Kinds is the list of channels a program runs, in its order: what it
// says about its channels (their names, their people's key prefixes,
// their credentials' shapes) and the config file's sections are read
// from it, so adding a channel changes nothing else.
type Kinds []Kind

// File is the type a config file is read into: base's keys inline
// (field 0), then one section for each kind, keyed by its name and of
// its channel's config type (field i+1 for ks[i]).
func (ks Kinds) File(base reflect.Type) reflect.Type {
	fields := []reflect.StructField{{Name: "Base", Type: base, Tag: `yaml:",inline"`}}
	for i, k := range ks {
		fields = append(fields, reflect.StructField{
			Name: fmt.Sprintf("Channel%d", i), Type: k.ConfigType(), Tag: reflect.StructTag(fmt.Sprintf("yaml:%q", k.Name())),
		})
	}
	return reflect.StructOf(fields)
}

// Shapes are the credential patterns the channels declare.
func (ks Kinds) Shapes() []string {
	var out []string
	for _, k := range ks {
		out = append(out, k.Shapes()...)
	}
	return out
}

// Names lists the channels' names, each followed by suffix, the last
// after last ("and", "or"): "telegram, slack or discord".
func (ks Kinds) Names(suffix, last string) string {
	names := make([]string, len(ks))
	for i, k := range ks {
		names[i] = k.Name() + suffix
	}
	if n := len(names); n > 1 {
		return strings.Join(names[:n-1], ", ") + " " + last + " " + names[n-1]
	}
	return strings.Join(names, "")
}

// ExampleUser shows the prefixes of a person's key in the channels:
// "telegram:…, slack:… or discord:…", each followed by the person's id
// in that channel. A channel whose people sign in with another's key
// (the browser chat) gives none.
func (ks Kinds) ExampleUser() string {
	var keyed Kinds
	for _, k := range ks {
		if k.UserKeys() {
			keyed = append(keyed, k)
		}
	}
	return keyed.Names(":…", "or")
}
