package settings

import (
	"reflect"
	"slices"
	"strings"
	"testing"
)

// The console lists the people each channel lets in from what the
// channel declares (Declaration.Allowed), not from a field's name: a
// channel whose section has an allow-list (an allowed_… list of
// strings naming people) declares it, and the list it gives is the
// section's.
func TestEveryChannelDeclaresWhomItAllows(t *testing.T) {
	people := map[string]bool{"allowed_users": true, "allowed_numbers": true, "allowed_senders": true, "allowed_nicks": true}
	for _, k := range ChannelKinds() {
		section := reflect.New(k.ConfigType()).Elem()
		var want []string
		for _, f := range reflect.VisibleFields(k.ConfigType()) {
			name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			if people[name] && f.Type == reflect.TypeFor[[]string]() {
				want = []string{"someone-of-" + k.Name()}
				section.FieldByIndex(f.Index).Set(reflect.ValueOf(want))
			}
		}
		if got := k.Allowed(section.Interface()); !slices.Equal(got, want) {
			t.Errorf("%s: Allowed = %q, want the section's allow-list %q", k.Name(), got, want)
		}
	}
}
