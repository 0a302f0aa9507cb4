package tools

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strings"
	"sync"
	"time"
	"unicode"
)

// FindToolsName is the core tool that searches the catalog.
const FindToolsName = "find_tools"

type findInput struct {
	Query string `json:"query" desc:"the task, in a few words"`
	Limit int    `json:"limit,omitempty"`
	Load  bool   `json:"load,omitempty" desc:"also load their groups"`
}

// FindTools returns find_tools: the model describes what it wants to do
// and gets the tools that fit best, ranked with BM25 over each tool's
// name, description, parameters and group; with load it loads their
// groups too, recorded like load_tool_group (the engine reads the loaded
// groups from Result.Groups). Disabled tools and groups the caller may
// not load are never returned. The index follows the registry's changes.
func FindTools(r *Registry) Tool {
	ix := &searchIndex{reg: r}
	return New(Definition{
		Name:        FindToolsName,
		Description: "Find the tools for a task.",
		ReadOnly:    true,
		Timeout:     5 * time.Second,
	}, func(ctx context.Context, in findInput) (any, error) {
		q := strings.TrimSpace(in.Query)
		if q == "" {
			return nil, &Error{Code: CodeMissingParameter, Message: "Required parameter 'query' is missing.",
				Suggestion: "Describe the task in a few words, e.g. 'move a calendar event'.", Details: map[string]any{"required_param": "query"}}
		}
		limit := in.Limit
		if limit <= 0 || limit > 20 {
			limit = 5
		}
		caller := CallerFrom(ctx)
		hits := ix.search(q, func(name, group string) bool {
			if caller.Disabled[name] {
				return false
			}
			if group == "" {
				return true
			}
			g, ok := r.Group(group)
			return ok && (g.Admit == nil || g.Admit(ctx))
		}, limit)
		if len(hits) == 0 {
			return nil, &Error{Code: CodeNotFound, Message: fmt.Sprintf("No tool fits '%s'.", q),
				Suggestion: "Describe the task differently, or tell the person it cannot be done here."}
		}
		var b strings.Builder
		var groups []string
		for _, h := range hits {
			where := h.group
			if where == "" {
				where = "core"
			} else if !contains(groups, h.group) {
				groups = append(groups, h.group)
			}
			fmt.Fprintf(&b, "- %s (%s): %s\n", h.name, where, h.desc)
		}
		out := strings.TrimRight(b.String(), "\n")
		if in.Load && len(groups) > 0 {
			sort.Strings(groups)
			return loaded{text: out + "\nLoaded groups: " + strings.Join(groups, ", ") + ". Their tools are available now.", groups: groups}, nil
		}
		if len(groups) > 0 {
			out += "\nLoad a group with load_tool_group (or call find_tools with load: true) before using its tools."
		}
		return out, nil
	})
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// loaded is the answer of a call that changed the session's groups
// (load_tool_group, unload_tool_group, find_tools with load): the
// executor turns it into a result carrying the changes.
type loaded struct {
	text   string
	groups []string
}

// searchIndex is a BM25 index of the registry's tools, rebuilt when the
// registry changes.
type searchIndex struct {
	reg     *Registry
	mu      sync.Mutex
	version uint64
	built   bool
	docs    []searchDoc
	df      map[string]int
	avgLen  float64
}

type searchDoc struct {
	name, group, desc string
	tf                map[string]int
	length            int
}

type hit struct {
	name, group, desc string
	score             float64
}

func (ix *searchIndex) search(q string, allowed func(name, group string) bool, limit int) []hit {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if v := ix.reg.Version(); !ix.built || v != ix.version {
		ix.build()
		ix.version, ix.built = v, true
	}
	terms := expand(searchWords(q))
	const k1, b = 1.2, 0.75
	n := float64(len(ix.docs))
	var hits []hit
	for _, d := range ix.docs {
		if !allowed(d.name, d.group) {
			continue
		}
		score := 0.0
		for t, w := range terms {
			tf := float64(d.tf[t])
			if tf == 0 {
				continue
			}
			df := float64(ix.df[t])
			idf := math.Log(1 + (n-df+0.5)/(df+0.5))
			score += w * idf * tf * (k1 + 1) / (tf + k1*(1-b+b*float64(d.length)/ix.avgLen))
		}
		if score > 0 {
			hits = append(hits, hit{d.name, d.group, d.desc, score})
		}
	}
	sort.SliceStable(hits, func(i, j int) bool { return hits[i].score > hits[j].score })
	if len(hits) > limit {
		hits = hits[:limit]
	}
	return hits
}

// build indexes every tool but the catalog's own two: the name counts
// three times, the description twice, parameters and group once.
func (ix *searchIndex) build() {
	defs := ix.reg.All(nil)
	ix.docs, ix.df = nil, map[string]int{}
	total := 0
	for _, d := range defs {
		if d.Name == FindToolsName || d.Name == LoadGroupName || d.Name == UnloadGroupName {
			continue
		}
		tf := map[string]int{}
		add := func(text string, weight int) {
			for _, w := range searchWords(text) {
				tf[w] += weight
			}
		}
		add(strings.ReplaceAll(d.Name, "_", " "), 3)
		add(d.Description, 2)
		add(string(d.Parameters), 1)
		if g, ok := ix.reg.Group(d.Group); ok {
			add(strings.ReplaceAll(g.Name, "_", " ")+" "+g.Description, 1)
		}
		length := 0
		for w, c := range tf {
			ix.df[w]++
			length += c
		}
		total += length
		ix.docs = append(ix.docs, searchDoc{name: d.Name, group: d.Group, desc: d.Description, tf: tf, length: length})
	}
	ix.avgLen = math.Max(1, float64(total)/math.Max(1, float64(len(ix.docs))))
}

// compounds are written forms of one word, made one before splitting.
var compounds = strings.NewReplacer("to-do", "todo", "to do list", "todo list")

// searchWords are text's lowercase words, lightly stemmed, without the
// commonest words and JSON Schema's own.
func searchWords(text string) []string {
	var out []string
	text = compounds.Replace(strings.ToLower(text))
	for _, w := range strings.FieldsFunc(text, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }) {
		if stop[w] || len(w) < 2 {
			continue
		}
		out = append(out, stem(w))
	}
	return out
}

// stem drops common English endings, so "meetings" finds "meeting".
func stem(w string) string {
	for _, suf := range []string{"ing", "ies", "es", "ed", "s"} {
		if len(w) > len(suf)+3 && strings.HasSuffix(w, suf) {
			if suf == "ies" {
				return w[:len(w)-3] + "y"
			}
			return w[:len(w)-len(suf)]
		}
	}
	return w
}

var stop = map[string]bool{
	"the": true, "a": true, "an": true, "to": true, "of": true, "and": true, "or": true, "in": true, "on": true, "for": true,
	"my": true, "me": true, "is": true, "it": true, "this": true, "that": true, "with": true, "from": true, "by": true,
	"be": true, "can": true, "you": true, "please": true, "what": true, "who": true, "when": true, "do": true, "i": true,
	"type": true, "string": true, "object": true, "properties": true, "required": true, "description": true, "integer": true,
	"boolean": true, "array": true, "items": true, "enum": true,
}

// synonyms widen a query's words to the words the tools use, at half
// weight.
var synonyms = map[string][]string{
	"email": {"mail", "gmail", "message"}, "mail": {"gmail", "email"}, "inbox": {"gmail", "mail"}, "emailed": {"gmail", "mail", "search"},
	"meeting": {"event", "calendar"}, "appointment": {"event", "calendar"}, "schedule": {"calendar", "event"}, "busy": {"freebusy"},
	"free": {"freebusy"}, "available": {"freebusy"}, "move": {"update"}, "reschedule": {"update", "event"}, "cancel": {"delete"},
	"document": {"file", "drive"}, "doc": {"file", "drive"}, "folder": {"drive"}, "spreadsheet": {"file", "drive"}, "sheet": {"drive", "file"},
	"remove": {"delete", "trash"}, "bin": {"trash"}, "remind": {"schedule", "task"}, "reminder": {"scheduled", "task"}, "later": {"scheduled", "task"},
	"every": {"scheduled", "task", "interval"}, "daily": {"cron", "scheduled"}, "weekly": {"cron", "scheduled"},
	"remember": {"memory", "save"}, "forget": {"memory"}, "recall": {"memory"}, "said": {"history", "search"}, "earlier": {"history"},
	"decide": {"history"}, "decided": {"history"}, "conversation": {"history"}, "website": {"web", "page"}, "page": {"web", "fetch"},
	"google": {"search", "web"}, "internet": {"web"}, "url": {"web", "fetch"}, "link": {"web", "fetch"}, "api": {"http", "request"},
	"endpoint": {"http", "request"}, "pdf": {"pdf"}, "picture": {"render", "png"}, "image": {"render", "png"}, "run": {"exec", "command"},
	"command": {"exec"}, "script": {"exec"}, "share": {"share", "permission"}, "vacation": {"vacation"}, "away": {"vacation"},
	"signature": {"signature"}, "label": {"labels"}, "tag": {"labels"}, "draft": {"draft"}, "answer": {"reply"}, "respond": {"reply"},
	"write": {"create", "send"}, "time": {"current", "time"}, "date": {"current", "time"}, "today": {"current", "time"},
	"name": {"agent", "config"}, "rename": {"agent", "config"}, "disable": {"tool", "settings"}, "enable": {"tool", "settings"},
	"file": {"files", "drive"}, "save": {"write", "files"}, "upload": {"create", "file", "drive"}, "attachment": {"files"},
	"delete": {"trash"}, "invoice": {"search"}, "find": {"search"}, "look": {"search"}, "detail": {"get"}, "show": {"get", "read"},
	"tool": {"custom", "manage"}, "new": {"create"}, "todo": {"task", "tasks"}, "survey": {"form"}, "questionnaire": {"form"},
	"deck": {"presentation", "slides"}, "presentation": {"slides"}, "phone": {"contact"}, "address": {"contact"},
	"cell": {"sheet", "range"}, "row": {"sheet", "range"}, "tab": {"sheet"}, "done": {"complete"},
}

// expand weighs a query's words, adding their synonyms at half weight.
func expand(words []string) map[string]float64 {
	out := map[string]float64{}
	for _, w := range words {
		out[w] = 1
	}
	for _, w := range words {
		for _, s := range synonyms[w] {
			s = stem(s)
			if _, ok := out[s]; !ok {
				out[s] = 0.5
			}
		}
	}
	return out
}
