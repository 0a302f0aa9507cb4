package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"net/mail"
	"net/url"
	"path"
	"reflect"
	"slices"
	"strings"

	"golang.org/x/net/idna"
)

// Reach is what a call reaches outside loadout, as its tool declares it:
// whom it mails, invites or shares with, which hosts it connects to,
// which folders it touches. Rules, the "Always allow" offer, the question
// and the audit trail all read it (see ReachOf).
type Reach struct {
	// Action is the call's "action" argument, lower-cased: the action of
	// a domain tool.
	Action string
	// Recipients are the addresses a call mails, invites or shares with,
	// as the sending code parses them; Domains are their domains.
	Recipients []string
	Domains    []string
	// Hosts are the hosts of the URLs a call connects to.
	Hosts []string
	// Folders are the folders a call touches: a file's own folder, not
	// the ones above it; relative, "." for the top; case kept, as the
	// file system names them.
	Folders []string
	// Unknown lists what the call may reach that could not be accounted
	// for: an address list that would not parse, text with an address or
	// URL in an open tool's arguments, recipients a tool could not
	// resolve. No scoped allow rule covers a call with an unknown reach,
	// and none is offered for it.
	Unknown []string
}

// Known reports whether everything the call reaches is accounted for.
func (r Reach) Known() bool { return len(r.Unknown) == 0 }

// String is the reach as the audit trail records it: "addresses at
// example.com; hosts api.example.org; unknown: …"; "" for none.
func (r Reach) String() string {
	var parts []string
	if len(r.Recipients) > 0 {
		parts = append(parts, "recipients "+strings.Join(r.Recipients, ", "))
	}
	if len(r.Hosts) > 0 {
		parts = append(parts, "hosts "+strings.Join(r.Hosts, ", "))
	}
	if len(r.Folders) > 0 {
		parts = append(parts, "folders "+strings.Join(r.Folders, ", "))
	}
	if len(r.Unknown) > 0 {
		parts = append(parts, "cannot tell: "+strings.Join(r.Unknown, "; "))
	}
	return strings.Join(parts, "; ")
}

// Kinds of reach a field of a tool's typed input declares in its reach
// tag (see New): `reach:"recipients"` for addresses (a comma-separated
// list in a string, or one per item of a list), "url" for URLs the call
// connects to, "host", "path" for a file's path, "folder" for a folder;
// "-" says a field whose name looks like one of them reaches nothing (a
// date called "to", a filter's criterion).
const (
	ReachRecipients = "recipients"
	ReachURL        = "url"
	ReachHost       = "host"
	ReachPath       = "path"
	ReachFolder     = "folder"
	ReachNone       = "-"
)

// reachyNames are parameter names that say a text reaches someone or
// somewhere, and reachyParts parts of such names: a typed input's text
// field of such a name must declare its reach tag, so nothing is left to
// a guess (see reachy).
var (
	reachyNames = []string{"to", "cc", "bcc", "address", "addresses", "share_with", "grantee", "link", "href", "domain",
		"server", "website", "uri", "file", "files", "filename", "folder", "folders", "dir", "directory",
		"source", "destination", "src", "dst"}
	reachyParts = []string{"email", "attendee", "recipient", "url", "forward", "path", "host", "endpoint", "webhook"}
)

// reachy reports whether a field named name of type t looks like it
// reaches someone or somewhere: a text or a list of texts under a name
// of reachyNames, or one with a part of reachyParts.
func reachy(name string, t reflect.Type) bool {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Array {
		t = t.Elem()
	}
	if t.Kind() != reflect.String {
		return false
	}
	name = strings.ToLower(name)
	return slices.Contains(reachyNames, name) || slices.ContainsFunc(reachyParts, func(p string) bool { return strings.Contains(name, p) })
}

// reachField is one field of a typed input that declares a reach, by its
// index path.
type reachField struct {
	index []int
	kind  string
	name  string
}

// reachFields reads the reach tags of a typed input's type. It panics on
// a field whose name looks like a reach (reachyNames) without a tag, or a
// tag it does not know: inputs are types of this codebase, read at
// start-up, so either is a programming error.
func reachFields(t reflect.Type) []reachField {
	var out []reachField
	var walk func(t reflect.Type, at []int, where string)
	walk = func(t reflect.Type, at []int, where string) {
		for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Array {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct {
			return
		}
		for i := range t.NumField() {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if !f.IsExported() || name == "-" {
				continue
			}
			if name == "" {
				name = f.Name
			}
			idx := append(slices.Clip(at), i)
			kind, tagged := f.Tag.Lookup("reach")
			switch {
			case !tagged && reachy(name, f.Type):
				panic(fmt.Sprintf("tools: %s.%s looks like it reaches someone or somewhere: declare it with a reach tag (recipients, url, host, path, folder, or - for nothing)", where, name))
			case !tagged, kind == ReachNone:
				walk(f.Type, idx, where+"."+name)
			case slices.Contains([]string{ReachRecipients, ReachURL, ReachHost, ReachPath, ReachFolder}, kind):
				out = append(out, reachField{index: idx, kind: kind, name: name})
			default:
				panic(fmt.Sprintf("tools: %s.%s has the unknown reach %q", where, name, kind))
			}
		}
	}
	walk(t, nil, t.String())
	return out
}

// reachOfValue reads the reach a typed input declares through its tags.
func reachOfValue(fields []reachField, v reflect.Value) Reach {
	var r Reach
	for _, f := range fields {
		for _, s := range stringsAt(v, f.index) {
			r.add(f.kind, f.name, s)
		}
	}
	return r
}

// stringsAt is every string at index below v, through pointers, lists
// and nested structs.
func stringsAt(v reflect.Value, index []int) []string {
	for v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface {
		if v.IsNil() {
			return nil
		}
		v = v.Elem()
	}
	switch v.Kind() {
	case reflect.Slice, reflect.Array:
		var out []string
		for i := range v.Len() {
			out = append(out, stringsAt(v.Index(i), index)...)
		}
		return out
	case reflect.Struct:
		if len(index) == 0 {
			return nil
		}
		return stringsAt(v.Field(index[0]), index[1:])
	case reflect.String:
		if len(index) == 0 {
			return []string{v.String()}
		}
	}
	return nil
}

// add reads s, the value of a parameter declared of kind, into r.
func (r *Reach) add(kind, name, s string) {
	s = strings.TrimSpace(s)
	if s == "" {
		return
	}
	switch kind {
	case ReachRecipients:
		list, err := mail.ParseAddressList(s)
		if err != nil {
			r.Unknown = append(r.Unknown, fmt.Sprintf("%s %q does not read as addresses", name, Shorten(s, 80)))
			return
		}
		for _, a := range list {
			r.addAddress(a.Address)
		}
	case ReachURL:
		if h, ok := hostOf(s); ok {
			r.Hosts = append(r.Hosts, h)
		} else {
			r.Unknown = append(r.Unknown, fmt.Sprintf("%s %q names no host", name, Shorten(s, 80)))
		}
	case ReachHost:
		r.Hosts = append(r.Hosts, NormalHost(s))
	case ReachPath:
		r.Folders = append(r.Folders, folderOf(path.Dir(path.Clean("/"+s))))
	case ReachFolder:
		r.Folders = append(r.Folders, folderOf(path.Clean("/"+s)))
	}
}

// addAddress adds one parsed address and its domain.
func (r *Reach) addAddress(addr string) {
	at := strings.LastIndex(addr, "@")
	if at < 0 {
		r.Unknown = append(r.Unknown, fmt.Sprintf("the address %q has no domain", Shorten(addr, 80)))
		return
	}
	d := NormalHost(addr[at+1:])
	r.Recipients = append(r.Recipients, addr[:at+1]+d)
	r.Domains = append(r.Domains, d)
}

// hostOf is the host a URL connects to: of an absolute URL, or of one
// written without its scheme ("example.com/x").
func hostOf(s string) (string, bool) {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" {
		if strings.Contains(s, "://") || strings.ContainsAny(s, " \t\r\n") {
			return "", false
		}
		if u, err = url.Parse("//" + s); err != nil || u.Host == "" {
			return "", false
		}
	}
	if h := u.Hostname(); h != "" {
		return NormalHost(h), true
	}
	return "", false
}

// NormalHost is a domain or host as rules compare them: lower-case, in
// its ASCII (IDNA) form, without a trailing dot. A name IDNA refuses (an
// address literal "[192.0.2.7]") is kept as written, lower-cased.
func NormalHost(h string) string {
	h = strings.TrimSuffix(strings.ToLower(strings.TrimSpace(h)), ".")
	if a, err := idna.Lookup.ToASCII(h); err == nil && a != "" {
		return a
	}
	return h
}

// openKeys are the names under which an open tool's argument is read as
// a host even without a scheme.
var openURLKeys = []string{"url", "urls", "uri", "link", "href", "endpoint", "host", "hostname", "domain", "server", "website", "webhook"}

// ReachOfJSON reads the reach of an open tool's call (an MCP server's, a
// manifest's, one made in a chat) from its arguments as checked, failing
// closed: a string that holds an '@' must read as a list of addresses as
// net/mail (the parser the sending code uses) reads it, and one that holds
// "://" must be one URL; anything else address-like or URL-like is an
// unknown reach, with the addresses and hosts a pattern finds in it
// added for the deny and ask rules. A value under a URL-like name
// (url, host, endpoint…) is a host even without its scheme, and one
// under a path-like name a folder. Its cost is linear in the arguments'
// size.
func ReachOfJSON(args string) Reach {
	var v any
	dec := json.NewDecoder(strings.NewReader(args))
	dec.UseNumber()
	if dec.Decode(&v) != nil {
		if strings.TrimSpace(args) == "" {
			return Reach{}
		}
		return Reach{Unknown: []string{"the arguments do not read as JSON"}}
	}
	var r Reach
	r.walkOpen("", v)
	r.Action = argAction(args)
	r.tidy()
	return r
}

func (r *Reach) walkOpen(key string, v any) {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			if strings.ContainsAny(k, "@:/") {
				r.readOpen("", k)
			}
			r.walkOpen(strings.ToLower(k), x)
		}
	case []any:
		for _, x := range v {
			r.walkOpen(key, x)
		}
	case string:
		r.readOpen(key, v)
	}
}

// readOpen reads one string of an open tool's arguments.
func (r *Reach) readOpen(key, s string) {
	t := strings.TrimSpace(s)
	if t == "" {
		return
	}
	hasAt, hasScheme := strings.Contains(t, "@"), strings.Contains(t, "://")
	switch {
	case hasScheme && !strings.ContainsAny(t, " \t\r\n"):
		// One URL: its user-info is no address.
		if h, ok := hostOf(t); ok && strings.Count(t, "://") == 1 {
			r.Hosts = append(r.Hosts, h)
		} else {
			r.unknownText(key, t)
		}
	case hasScheme:
		r.unknownText(key, t)
	case hasAt:
		if list, err := mail.ParseAddressList(t); err == nil {
			for _, a := range list {
				r.addAddress(a.Address)
			}
		} else {
			r.unknownText(key, t)
		}
	case slices.Contains(openURLKeys, key):
		if h, ok := hostOf(t); ok {
			r.Hosts = append(r.Hosts, h)
		} else {
			r.unknownText(key, t)
		}
	case slices.Contains(pathKeys, key):
		r.add(ReachPath, key, t)
	case slices.Contains(folderKeys, key):
		r.add(ReachFolder, key, t)
	}
}

// unknownText records text that may reach something it cannot account
// for, and adds what a pattern finds in it, so that a deny or ask rule
// for those still applies.
func (r *Reach) unknownText(key, s string) {
	where := "a value"
	if key != "" {
		where = key
	}
	r.Unknown = append(r.Unknown, fmt.Sprintf("%s %q holds an address or URL that does not read whole", where, Shorten(s, 80)))
	for _, a := range addressPattern().FindAllString(s, -1) {
		r.addAddress(a)
	}
	for _, u := range urlPattern().FindAllString(s, -1) {
		if h, ok := hostOf(u); ok {
			r.Hosts = append(r.Hosts, h)
		}
	}
}

// pathKeys name the arguments of an open tool that hold a file's path;
// folderKeys a folder's.
var (
	pathKeys   = []string{"path", "paths", "file", "files", "filename", "source", "destination", "src", "dst", "from_path", "to_path"}
	folderKeys = []string{"folder", "folders", "dir", "directory"}
)

// folderOf is a folder as rules name it: relative, "." for the top, its
// case kept.
func folderOf(p string) string {
	p = strings.TrimPrefix(p, "/")
	if p == "" {
		return "."
	}
	return p
}

// merge adds o's reach to r.
func (r *Reach) merge(o Reach) {
	r.Recipients = append(r.Recipients, o.Recipients...)
	r.Domains = append(r.Domains, o.Domains...)
	r.Hosts = append(r.Hosts, o.Hosts...)
	r.Folders = append(r.Folders, o.Folders...)
	r.Unknown = append(r.Unknown, o.Unknown...)
}

// tidy sorts every list and keeps each value once: the walk meets an
// object's keys in no set order.
func (r *Reach) tidy() {
	for _, l := range []*[]string{&r.Recipients, &r.Domains, &r.Hosts, &r.Folders, &r.Unknown} {
		slices.Sort(*l)
		*l = slices.Compact(*l)
		if len(*l) == 0 {
			*l = nil
		}
	}
}

// ReachOf is what a call of d reaches, read from its one declaration:
// the reach tags of a typed input (see New), else, for an open tool (an
// MCP server's, a manifest's), ReachOfJSON of its arguments; plus what
// the tool resolves at run time (Definition.Reaches). Action is the
// call's "action" argument.
func ReachOf(ctx context.Context, d Definition, in Input) Reach {
	var r Reach
	if d.reach != nil {
		r = d.reach(in.Value)
	} else {
		r = ReachOfJSON(in.JSON)
	}
	r.Action = argAction(in.JSON)
	if d.Reaches != nil {
		r.merge(d.Reaches(ctx, in.Value))
	}
	r.tidy()
	return r
}

// argAction is the "action" argument of a call, lower-cased.
func argAction(args string) string {
	var m map[string]any
	_ = json.Unmarshal([]byte(args), &m)
	a, _ := m["action"].(string)
	return strings.ToLower(strings.TrimSpace(a))
}

// AddressReach is the reach of the addresses of list (mail headers,
// attendees), for a Definition.Reaches: each one as net/mail reads it;
// one that does not read is an unknown reach.
func AddressReach(list ...string) Reach {
	var r Reach
	for _, s := range list {
		r.add(ReachRecipients, "address", s)
	}
	return r
}

// UnknownReach is the reach of a call whose tool could not tell what it
// reaches, said for the person who reads the question.
func UnknownReach(why string) Reach { return Reach{Unknown: []string{why}} }
