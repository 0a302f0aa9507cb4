package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/kljensen/snowball/english"
)

// FindToolsName is the core tool that searches the catalog.
const FindToolsName = "find_tools"

// LoadShare is how close to the best match's score a result must come
// for find_tools with load to load its group.
const LoadShare = 0.9

type findInput struct {
	Query string `json:"query" desc:"the task, in a few words"`
	Limit int    `json:"limit,omitempty"`
	Load  bool   `json:"load,omitempty" desc:"load their groups too"`
}

// FindTools returns find_tools: the model describes what it wants to do
// and gets the tools that fit best (see searchIndex for the ranking);
// with load it also loads the groups of those close to the best,
// recorded like load_tool_group (the engine reads the loaded groups
// from Result.Groups). Disabled tools and groups the caller may not load
// are never returned. The index follows the registry's changes.
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
		admitted := map[string]bool{} // each group asked once a call
		hits := ix.search(q, func(name, group string) bool {
			if caller.Disabled[name] {
				return false
			}
			if group == "" {
				return true
			}
			ok, asked := admitted[group]
			if !asked {
				g, found := r.Group(group)
				ok = found && (g.Admit == nil || g.Admit(ctx))
				admitted[group] = ok
			}
			return ok
		}, limit)
		if len(hits) == 0 {
			return nil, &Error{Code: CodeNotFound, Message: fmt.Sprintf("No tool fits '%s'.", q),
				Suggestion: "Describe the task differently, or tell the person it cannot be done here."}
		}
		var b strings.Builder
		var groups, confident []string
		for _, h := range hits {
			where := h.group
			if where == "" {
				where = "core"
			} else if !slices.Contains(groups, h.group) {
				groups = append(groups, h.group)
			}
			// Only a group whose tool scores close to the best is
			// loaded: every schema loaded costs tokens on every turn.
			if h.group != "" && h.score >= LoadShare*hits[0].score && !slices.Contains(confident, h.group) {
				confident = append(confident, h.group)
			}
			fmt.Fprintf(&b, "- %s (%s): %s\n", h.name, where, h.desc)
		}
		out := strings.TrimRight(b.String(), "\n")
		if in.Load {
			// A group that prepares itself for a load (lists its tools,
			// asks the person) does so here too; one that refuses is not
			// loaded.
			var refused []string
			confident = slices.DeleteFunc(confident, func(name string) bool {
				g, _ := r.Group(name)
				if g.Prepare != nil && g.Prepare(ctx) != nil {
					refused = append(refused, name)
					return true
				}
				return false
			})
			if len(refused) > 0 {
				out += "\nNot loaded, as they could not be loaded now: " + strings.Join(refused, ", ") + "; load_tool_group says why."
			}
		}
		if in.Load && len(confident) > 0 {
			sort.Strings(confident)
			out += "\nLoaded groups: " + strings.Join(confident, ", ") + ". Their tools are available now."
			if len(confident) < len(groups) {
				out += fmt.Sprintf(" Not loaded, as their tools matched less well (under %d%% of the best match): %s; load one with load_tool_group if it is needed.",
					int(LoadShare*100), strings.Join(slices.DeleteFunc(slices.Clone(groups), func(g string) bool { return slices.Contains(confident, g) }), ", "))
			}
			return loaded{text: out, groups: LoadChanges(confident...)}, nil
		}
		if len(groups) > 0 {
			out += "\nLoad a group with load_tool_group (or call find_tools with load: true) before using its tools."
		}
		return out, nil
	})
}

// loaded is the answer of a call that changed the session's groups
// (load_tool_group, unload_tool_group, find_tools with load): the
// executor turns it into a result carrying the changes.
type loaded struct {
	text   string
	groups []GroupChange
}

// searchIndex is a BM25F index of the registry's tools, rebuilt when the
// registry changes: each tool is a document of fields (its name, its
// description, its examples, its parameters, its group), each weighed
// and normalised by its own average length, and each group a document
// of its tools' words. A tool's score is its own, plus its name's words
// the request has, plus its group's (and the catch-all's share of
// unknown words), times what its verb fits the request's.
type searchIndex struct {
	reg     *Registry
	mu      sync.Mutex
	version uint64
	built   bool
	docs    []searchDoc
	df      map[string]int
	avgLen  [numFields]float64
	// topical are the words of names, examples and groups: what a
	// misspelt word is corrected to (descriptions' "while" and "whose"
	// are no topic).
	topical map[string]bool
	// groups are the groups as documents of all their tools' words, so
	// a request's words spread over a group's tools count for each of
	// them; a core tool is a group of its own. groupDF and groupAvg are
	// their document frequencies and average length.
	groups   map[string]*groupDoc
	groupDF  map[string]int
	groupAvg float64
}

type groupDoc struct {
	tf     map[string]int
	length int
}

// The fields of a tool's document.
const (
	fieldName = iota
	fieldDesc
	fieldExamples
	fieldParams
	fieldGroup
	numFields
)

// fieldWeight is how much a word counts in each field, fieldNorm how
// much the field's length lowers it (BM25F's w and b).
var (
	fieldWeight = [numFields]float64{3, 2, 2, 0.5, 1}
	fieldNorm   = [numFields]float64{0.3, 0.6, 0.75, 0.75, 0.5}
)

type searchDoc struct {
	name, group, desc string
	action            action
	catchall          bool
	tf                [numFields]map[string]int
	length            [numFields]int
}

type hit struct {
	name, group, desc string
	score             float64
}

// BM25F's saturation.
const bm25k1 = 1.2

func (ix *searchIndex) search(q string, allowed func(name, group string) bool, limit int) []hit {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if v := ix.reg.Version(); !ix.built || v != ix.version {
		ix.build()
		ix.version, ix.built = v, true
	}
	named, names := namesAsSomeone(q)
	words := searchWords(named)
	if len(words) > maxQueryWords {
		words = words[:maxQueryWords]
	}
	terms := expand(words)
	// A name is a word no tool has, to the catch-all: "how old is
	// Taylor Swift".
	unknown := float64(ix.correct(words, terms)) + nameUnknown*float64(names)
	intent := intentOf(q)
	n := float64(len(ix.docs))
	var hits []hit
	for _, d := range ix.docs {
		if !allowed(d.name, d.group) {
			continue
		}
		score := 0.0
		for t, w := range terms {
			tf := 0.0
			for f := range numFields {
				c := float64(d.tf[f][t])
				if c == 0 {
					continue
				}
				norm := 1 - fieldNorm[f] + fieldNorm[f]*float64(d.length[f])/ix.avgLen[f]
				tf += fieldWeight[f] * c / norm
			}
			if tf == 0 {
				continue
			}
			df := float64(ix.df[t])
			idf := math.Log(1 + (n-df+0.5)/(df+0.5))
			score += w * idf * tf / (tf + bm25k1)
		}
		for nw := range d.tf[fieldName] {
			if w, ok := terms[nw]; ok {
				score += nameBonus * w
			}
		}
		if d.catchall && len(words) > 0 {
			// What no tool knows of is a question about the world.
			score += catchallWeight * math.Min(1, unknown/float64(len(words)))
		}
		if score <= 0 {
			continue
		}
		score += groupWeight * ix.groupScore(d.groupKey(), terms)
		// A request that asks to look gains on tools that read; one
		// that asks to change gains on tools that act.
		if f := fit(intent, d.action); f > 0 {
			score *= 1 + f
		}
		hits = append(hits, hit{d.name, d.group, d.desc, score})
	}
	sort.SliceStable(hits, func(i, j int) bool { return hits[i].score > hits[j].score })
	if len(hits) > limit {
		hits = hits[:limit]
	}
	return hits
}

// maxQueryWords is how many of a request's words are read: a task is
// said in a few, and each word no tool has is compared with every tool
// word, so a long request (a model led on by a page it read) costs no
// more than this many.
const maxQueryWords = 32

// The ranking's weights, chosen on the tuning half of the request set
// (cmd/loadout/testdata/find_requests.tsv):
const (
	// groupWeight is how much the request's match with a tool's whole
	// group adds to the tool's own, and groupNorm how much a group's
	// length lowers it.
	groupWeight = 0.5
	groupNorm   = 0.75
	// synonymWeight is what a synonym of a request's word counts.
	synonymWeight = 0.3
	// typoMin is the length from which a word no tool uses is read as
	// a slip of one the index has: shorter ones are too near too many
	// others ("wifi" and "wife").
	typoMin = 5
	// effectBoost is what a tool that does the kind of thing the
	// request's verb asks (read, change, delete, send) gains.
	effectBoost = 0.3
	// verbBoost is what it gains when it does the very verb asked
	// (search, list, read, create, update, delete, send, reply…).
	verbBoost = 0.4
	// catchallWeight is what the catch-all tool (Definition.Catchall)
	// scores for a request none of whose words any tool has.
	catchallWeight = 4.0
	// nameBonus is what each word of a tool's name the request has
	// adds, beyond what the word weighs in the index: a name says what
	// the tool does ("text" in pdf_text), where a common word weighs
	// little.
	nameBonus = 0.75
	// nameUnknown is how much a person's name counts as a word no tool
	// has, for the catch-all.
	nameUnknown = 0.5
	// shortRequest is how many words a request without a verb may have
	// to be read as one to look.
	shortRequest = 3
)

// groupScore is BM25 of the request's terms over a group's document.
func (ix *searchIndex) groupScore(key string, terms map[string]float64) float64 {
	g := ix.groups[key]
	n := float64(len(ix.groups))
	score := 0.0
	for t, w := range terms {
		c := float64(g.tf[t])
		if c == 0 {
			continue
		}
		df := float64(ix.groupDF[t])
		idf := math.Log(1 + (n-df+0.5)/(df+0.5))
		tf := c / (1 - groupNorm + groupNorm*float64(g.length)/ix.groupAvg)
		score += w * idf * tf * (bm25k1 + 1) / (tf + bm25k1)
	}
	return score
}

// groupKey is the group a tool's document counts in: its own, or the
// tool itself for a core tool.
func (d *searchDoc) groupKey() string {
	if d.group == "" {
		return "tool:" + d.name
	}
	return d.group
}

// What a request asks for, and what a tool does, by their verbs: a
// kind of effect, and within it the verb itself. Creating and changing
// are one kind: "add a row" writes to a sheet, "put lunch on my
// calendar" creates an event.
type action struct{ kind, verb int }

// The kinds of effect.
const (
	kindNone   = iota
	kindRead   // search, list, read
	kindChange // create, add, update, move, replace, share, archive
	kindDelete // delete, unshare, clear
	kindSend   // send, reply
	kindAny    // a tool that does more than one of these
)

// The verbs.
const (
	verbNone = iota
	verbSearch
	verbList
	verbRead
	verbCreate
	verbUpdate
	verbMove
	verbReplace
	verbShare
	verbArchive
	verbExport
	verbDelete
	verbSend
	verbReply
)

var verbKind = map[int]int{
	verbSearch: kindRead, verbList: kindRead, verbRead: kindRead, verbExport: kindRead,
	verbCreate: kindChange, verbUpdate: kindChange, verbMove: kindChange, verbReplace: kindChange, verbShare: kindChange, verbArchive: kindChange,
	verbDelete: kindDelete,
	verbSend:   kindSend, verbReply: kindSend,
}

// requestVerbs are the words people use for each verb; the first one
// in a request says what it asks for. Question words ask to look,
// without saying how.
var requestVerbs = map[string]int{}

func init() {
	for verb, words := range map[int]string{
		verbSearch:  "find search look locate seek hunt any did has",
		verbList:    "list all every everyone which",
		verbRead:    "read get open view see show display check extract summarize summarise details content contents",
		verbCreate:  "create add make new start book block schedule put write save upload insert jot log draft plan prepare record build generate compose",
		verbUpdate:  "update change edit modify rename reschedule push postpone shift fix correct adjust mark tick complete finish turn enable disable switch label tag star flag fill rewrite set",
		verbMove:    "move reorder relocate nest",
		verbReplace: "replace swap",
		verbShare:   "share invite",
		verbArchive: "archive",
		verbExport:  "export download convert",
		verbDelete:  "delete remove trash bin cancel rid throw erase discard clear empty wipe drop unshare revoke stop",
		verbSend:    "send forward notify inform email mail shoot message text ping",
		verbReply:   "reply answer respond",
	} {
		for _, w := range strings.Fields(words) {
			requestVerbs[w] = verb
		}
	}
}

// questionWords ask to look.
var questionWords = map[string]bool{"what": true, "whats": true, "who": true, "how": true, "is": true, "are": true,
	"do": true, "does": true, "where": true, "when": true, "am": true, "was": true, "were": true, "have": true, "can": true}

// toolVerbs are what the words of a tool's name say it does.
var toolVerbs = map[string]int{
	"search": verbSearch, "list": verbList, "groups": verbList, "responses": verbList, "freebusy": verbSearch,
	"read": verbRead, "get": verbRead, "info": verbRead, "comments": verbRead, "response": verbRead, "render": verbRead,
	"create": verbCreate, "add": verbCreate, "insert": verbCreate,
	"update": verbUpdate, "modify": verbUpdate, "set": verbUpdate, "write": verbUpdate,
	"move": verbMove, "replace": verbReplace, "share": verbShare, "archive": verbArchive, "export": verbExport,
	"delete": verbDelete, "trash": verbDelete, "clear": verbDelete, "unshare": verbDelete,
	"send": verbSend, "reply": verbReply,
}

// actionOf is what a tool does: the first verb of its name; reading
// for a read-only tool whose name has none (pdf_text reads a PDF's
// text), and any kind for the rest (a tool with actions: files,
// memory, scheduled_tasks…).
func actionOf(d Definition) action {
	for _, w := range strings.Split(d.Name, "_") {
		if v, ok := toolVerbs[w]; ok {
			return action{verbKind[v], v}
		}
	}
	if d.ReadOnly {
		return action{kindRead, verbRead}
	}
	return action{kindAny, verbNone}
}

// intentOf is what a request's first verb asks for. A request to look
// that does not say how is read by its other words: "all" or "every"
// lists, "any" or "is there" searches, "say" or "whole" reads. A few
// words with no verb ask to look too; a longer request without a verb
// the table knows asks for nothing in particular ("dinner with Rui on
// Friday at 8" is no request to look).
func intentOf(q string) action {
	words := strings.FieldsFunc(strings.ToLower(q), func(r rune) bool { return !unicode.IsLetter(r) })
	for i, w := range words {
		if i+1 < len(words) {
			if v, ok := phrasalVerbs[w+" "+words[i+1]]; ok {
				return action{verbKind[v], v}
			}
		}
		if v, ok := requestVerbs[w]; ok && !lookHow[w] && (!nounsToo[w] || i == 0 || beforeVerb[words[i-1]]) {
			return action{verbKind[v], v}
		}
		if questionWords[w] || lookHow[w] {
			for _, w := range words {
				if v, ok := lookWords[w]; ok {
					return action{kindRead, v}
				}
			}
			return action{kindRead, verbNone}
		}
	}
	if len(words) <= shortRequest {
		return action{kindRead, verbNone} // "calendar tomorrow"
	}
	return action{}
}

// phrasalVerbs mean other than their verb alone: "get rid of" deletes,
// "get back to" replies.
var phrasalVerbs = map[string]int{"get rid": verbDelete, "get back": verbReply, "write back": verbReply, "set up": verbCreate,
	"look up": verbSearch, "look for": verbSearch, "look through": verbSearch, "throw away": verbDelete, "throw out": verbDelete,
	"take off": verbDelete, "take out": verbDelete, "fill in": verbUpdate, "call off": verbDelete, "turn off": verbUpdate,
	"turn on": verbUpdate, "switch off": verbUpdate, "switch on": verbUpdate, "give access": verbShare, "check for": verbSearch}

// nounsToo are verbs that are as often nouns ("the trip plan", "my
// email"): they are the request's verb only where a verb stands, first
// or after "please", "to", "you", "and"…
var nounsToo = map[string]bool{}

func init() {
	for _, w := range strings.Fields("plan log record note text message mail email book label tag star flag mark set schedule " +
		"share draft answer clear empty drop stop list search turn switch fill start new change update reply forward check") {
		nounsToo[w] = true
	}
}

// beforeVerb are the words after which a verb stands.
var beforeVerb = map[string]bool{"please": true, "pls": true, "and": true, "then": true, "to": true, "you": true, "just": true,
	"also": true, "now": true, "s": true, "can": true, "could": true, "will": true, "would": true, "i": true, "me": true}

// lookHow are the verbs of looking that do not say how ("show me").
var lookHow = map[string]bool{"show": true, "see": true, "view": true, "display": true, "check": true}

// lookWords say how to look.
var lookWords = map[string]int{"all": verbList, "every": verbList, "everyone": verbList, "everything": verbList, "each": verbList, "list": verbList,
	"where": verbSearch, "any": verbSearch, "anything": verbSearch, "anyone": verbSearch, "there": verbSearch, "find": verbSearch, "search": verbSearch, "look": verbSearch,
	"say": verbRead, "says": verbRead, "said": verbRead, "whole": verbRead, "full": verbRead, "read": verbRead, "open": verbRead, "details": verbRead}

// fit is what a tool that does act gains for a request that asks for
// intent: verbBoost for the very verb, effectBoost for its kind.
func fit(intent, act action) float64 {
	switch {
	case intent.kind == kindNone:
		return 0
	case intent.verb != verbNone && intent.verb == act.verb:
		return verbBoost
	case act.kind == kindAny || intent.kind == act.kind:
		return effectBoost
	}
	return 0
}

// build indexes every tool but the catalog's own three.
func (ix *searchIndex) build() {
	defs := ix.reg.All(nil)
	ix.docs, ix.df = make([]searchDoc, 0, len(defs)), make(map[string]int, 2048)
	var total [numFields]int
	groupWords := map[string][]string{}
	for _, d := range defs {
		if d.Name == FindToolsName || d.Name == LoadGroupName || d.Name == UnloadGroupName {
			continue
		}
		doc := searchDoc{name: d.Name, group: d.Group, desc: d.Description, action: actionOf(d), catchall: d.Catchall}
		add := func(f int, text string) {
			if doc.tf[f] == nil {
				doc.tf[f] = make(map[string]int, 16)
			}
			for _, w := range searchWords(text) {
				doc.tf[f][w]++
				doc.length[f]++
			}
		}
		add(fieldName, strings.ReplaceAll(d.Name, "_", " "))
		add(fieldDesc, d.Description)
		for _, e := range d.Examples {
			named, _ := namesAsSomeone(e)
			add(fieldExamples, named)
		}
		add(fieldParams, paramText(d.Parameters))
		if g, ok := ix.reg.Group(d.Group); ok {
			words, ok := groupWords[d.Group]
			if !ok {
				words = searchWords(g.DisplayName + " " + g.Description)
				groupWords[d.Group] = words
			}
			doc.tf[fieldGroup] = map[string]int{}
			for _, w := range words {
				doc.tf[fieldGroup][w]++
			}
			doc.length[fieldGroup] = len(words)
		}
		seen := map[string]bool{}
		for f := range numFields {
			total[f] += doc.length[f]
			for w := range doc.tf[f] {
				if !seen[w] {
					seen[w] = true
					ix.df[w]++
				}
			}
		}
		ix.docs = append(ix.docs, doc)
	}
	for f := range numFields {
		ix.avgLen[f] = math.Max(1, float64(total[f])/math.Max(1, float64(len(ix.docs))))
	}
	ix.topical = make(map[string]bool, len(ix.df))
	for _, d := range ix.docs {
		for _, f := range []int{fieldName, fieldExamples, fieldGroup} {
			for w := range d.tf[f] {
				ix.topical[w] = true
			}
		}
	}
	ix.groups, ix.groupDF = map[string]*groupDoc{}, make(map[string]int, len(ix.df))
	groupTotal := 0
	for i := range ix.docs {
		d := &ix.docs[i]
		g := ix.groups[d.groupKey()]
		if g == nil {
			g = &groupDoc{tf: make(map[string]int, 256)}
			ix.groups[d.groupKey()] = g
		}
		for f := range numFields {
			if f == fieldGroup && g.length > 0 {
				continue // the group's own words once
			}
			for w, c := range d.tf[f] {
				if g.tf[w] == 0 {
					ix.groupDF[w]++
				}
				g.tf[w] += c
				g.length += c
				groupTotal += c
			}
		}
	}
	ix.groupAvg = math.Max(1, float64(groupTotal)/math.Max(1, float64(len(ix.groups))))
}

// typoWeight is what a word the index has counts for a query word it
// does not have but is one slip away from ("serch", "calender").
const typoWeight = 0.5

// correct adds, for each query word no tool uses, the topical words one
// edit away (an insertion, a deletion, a substitution or two neighbours
// swapped), at typoWeight, for words of typoMin letters or more.
func (ix *searchIndex) correct(words []string, terms map[string]float64) (unknown int) {
	for _, w := range words {
		if ix.df[w] > 0 || synonyms[w] != nil {
			continue
		}
		found := false
		for t := range ix.topical {
			if len(w) >= typoMin && len(t)-len(w) >= -1 && len(t)-len(w) <= 1 && oneEdit(w, t) {
				found = true
				if _, ok := terms[t]; !ok {
					terms[t] = typoWeight
				}
			}
		}
		if !found {
			unknown++
		}
	}
	return unknown
}

// oneEdit reports whether a and b are one insertion, deletion,
// substitution or swap of neighbours apart. Linear in their length.
func oneEdit(a, b string) bool {
	if len(a) > len(b) {
		a, b = b, a
	}
	i := 0
	for i < len(a) && a[i] == b[i] {
		i++
	}
	switch {
	case i == len(a):
		return len(b)-len(a) == 1
	case len(a) == len(b):
		if a[i+1:] == b[i+1:] {
			return true
		}
		return i+1 < len(a) && a[i] == b[i+1] && a[i+1] == b[i] && a[i+2:] == b[i+2:]
	}
	return a[i:] == b[i+1:]
}

// paramText is what a schema says in words: its parameters' names and
// descriptions, without JSON Schema's own vocabulary.
func paramText(schema []byte) string {
	var s struct {
		Properties map[string]struct {
			Description string `json:"description"`
		} `json:"properties"`
	}
	if json.Unmarshal(schema, &s) != nil {
		return ""
	}
	var b strings.Builder
	for name, p := range s.Properties {
		b.WriteString(strings.ReplaceAll(name, "_", " "))
		b.WriteByte(' ')
		b.WriteString(p.Description)
		b.WriteByte(' ')
	}
	return b.String()
}

// httpMethods are HTTP's verbs as a request writes them: "send a GET".
var httpMethods = strings.NewReplacer("GET ", "http request ", "POST ", "http request ", "PUT ", "http request ",
	"PATCH ", "http request ", "DELETE ", "http request ")

// contractions are written out, so "won't" is not "won" and "isn't"
// not "isn".
var contractions = strings.NewReplacer("won't", "will not", "can't", "can not", "n't", " not", "’", "'",
	"won’t", "will not", "can’t", "can not", "n’t", " not")

// httpMethodMarks and compoundMarks are what a text has when
// httpMethods or compounds may change it: looking for them is much
// cheaper than replacing.
var (
	httpMethodMarks = []string{"GET ", "POST ", "PUT ", "PATCH ", "DELETE "}
	compoundMarks   = []string{"to-do", "to do", "e-mail", "out", "auto", "sign-off", "google"}
)

// mayHave reports whether text has any of marks.
func mayHave(text string, marks []string) bool {
	for _, m := range marks {
		if strings.Contains(text, m) {
			return true
		}
	}
	return false
}

// compounds are written forms of one word, made one before splitting.
var compounds = strings.NewReplacer("to-do", "todo", "to do list", "todo list", "e-mail", "email", "out-of-office", "vacation",
	"out of office", "vacation", "auto reply", "autoreply", "auto-reply", "autoreply", "sign-off", "signature", "google doc", "doc",
	"google sheet", "spreadsheet")

// searchWords are text's lowercase words, stemmed with the Snowball
// (Porter2) English stemmer, without the commonest words.
func searchWords(text string) []string {
	var out []string
	if mayHave(text, httpMethodMarks) {
		text = httpMethods.Replace(text)
	}
	text = strings.ToLower(text)
	if strings.IndexByte(text, '\'') >= 0 || strings.Contains(text, "’") {
		text = contractions.Replace(text)
	}
	if mayHave(text, compoundMarks) {
		text = compounds.Replace(text)
	}
	if hasShapes(text) {
		text = replaceShapes(text)
	}
	for _, w := range strings.FieldsFunc(text, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }) {
		if stop[w] || len(w) < 2 && !isDigits(w) {
			continue
		}
		if c := wordClass(w); c != "" {
			out = append(out, c)
			continue
		}
		out = append(out, stem(w))
	}
	return out
}

// namesAsSomeone writes the names of people in a request (a capital
// letter inside a sentence: "email Ana", "Pedro's number") as
// "someone": which person a request names picks no tool, and an example
// that names Ana must not pull every request about Ana to it. Words of
// products and services ("Gmail", "Drive"), days and shouting
// ("HR", "PDF") are not names.
func namesAsSomeone(text string) (string, int) {
	if !strings.ContainsFunc(text[min(1, len(text)):], unicode.IsUpper) {
		return text, 0
	}
	fields := strings.Fields(text)
	names := 0
	for i, f := range fields {
		if i == 0 || strings.ContainsAny(fields[i-1][len(fields[i-1])-1:], ".!?:") {
			continue // a sentence's first word
		}
		if titleBefore[strings.ToLower(fields[i-1])] {
			continue // a title: "a sheet called Workouts"
		}
		w := strings.TrimRightFunc(strings.TrimSuffix(strings.TrimSuffix(f, "'s"), "’s"), func(r rune) bool { return !unicode.IsLetter(r) })
		if len(w) < 2 || !unicode.IsUpper(rune(w[0])) || !isLetters(w) || strings.ToLower(w[1:]) != w[1:] {
			continue
		}
		if l := strings.ToLower(w); notNames[l] || timeWords[l] {
			continue
		}
		fields[i] = "someone"
		names++
	}
	if names == 0 {
		return text, 0
	}
	return strings.Join(fields, " "), names
}

// titleBefore are the words a title follows.
var titleBefore = map[string]bool{"called": true, "named": true, "titled": true, "as": true, "label": true, "tab": true}

// notNames are capitalised words that name no person.
var notNames = map[string]bool{}

func init() {
	for _, w := range strings.Fields("google gmail drive docs doc sheets sheet slides slide forms form tasks task calendar contacts contact " +
		"meet markdown csv pdf pdfs office word excel powerpoint json api url http https html png jpg zoom slack telegram whatsapp " +
		"python jq wifi ok english spanish portuguese french german") {
		notNames[w] = true
	}
}

// hasShapes reports whether text may have a link, a mail address or a
// file name: an "@", a "://", or a dot with a letter after it.
func hasShapes(text string) bool {
	for i := 0; i < len(text); i++ {
		switch text[i] {
		case '@':
			return true
		case ':':
			if strings.HasPrefix(text[i:], "://") || i > 0 && isDigit(text[i-1]) && i+1 < len(text) && isDigit(text[i+1]) {
				return true
			}
		case '.':
			if i+1 < len(text) && text[i+1] >= 'a' && text[i+1] <= 'z' {
				return true
			}
		}
	}
	return false
}

// replaceShapes writes what a link, a mail address, a file name or an
// hour is as the words for it ("url", "address", "file" and its type,
// an hour): which page, person, file or hour it names picks no tool,
// its shape does.
func replaceShapes(text string) string {
	fields := strings.Fields(text)
	for i, f := range fields {
		f = strings.TrimRightFunc(f, func(r rune) bool { return strings.ContainsRune(".,;:!?)\"'", r) })
		switch {
		case strings.HasPrefix(f, "http://") || strings.HasPrefix(f, "https://") || strings.HasPrefix(f, "www."):
			fields[i] = "url"
		case strings.Contains(f, "@") && strings.Contains(f[strings.Index(f, "@"):], "."):
			fields[i] = "address"
		case isClock(f):
			fields[i] = f[:strings.IndexByte(f, ':')] + "h"
		default:
			if dot := strings.LastIndexByte(f, '.'); dot > 1 && len(f)-dot >= 3 && len(f)-dot <= 5 && isLetters(f[dot+1:]) {
				fields[i] = f[:dot] + " file " + f[dot+1:]
			}
		}
	}
	return strings.Join(fields, " ")
}

// isClock reports whether f is an hour written with a colon: "9:30",
// "14:00", "7:15pm".
func isClock(f string) bool {
	h, m, ok := strings.Cut(f, ":")
	m = strings.TrimSuffix(strings.TrimSuffix(m, "am"), "pm")
	return ok && len(h) >= 1 && len(h) <= 2 && isDigits(h) && len(m) == 2 && isDigits(m)
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func isLetters(w string) bool {
	for _, r := range w {
		if !unicode.IsLetter(r) {
			return false
		}
	}
	return true
}

// wordClass is the class a word of time or a number stands for: which
// day or hour a request names says which tool it is for no more than
// any other day or hour would, so all of them are one word.
func wordClass(w string) string {
	if timeWords[w] {
		return "⌚"
	}
	i := 0
	for i < len(w) && w[i] >= '0' && w[i] <= '9' {
		i++
	}
	switch {
	case i == 0:
		return ""
	case i == len(w):
		return "#"
	case w[i:] == "am" || w[i:] == "pm" || w[i:] == "h" || w[i:] == "st" || w[i:] == "nd" || w[i:] == "rd" || w[i:] == "th":
		return "⌚"
	}
	return ""
}

func isDigits(w string) bool {
	for _, r := range w {
		if r < '0' || r > '9' {
			return false
		}
	}
	return w != ""
}

// timeWords name a day, a part of one, or a month.
var timeWords = map[string]bool{}

func init() {
	for _, w := range strings.Fields("monday tuesday wednesday thursday friday saturday sunday tue tues thu thurs fri " +
		"today tomorrow tonight yesterday weekend morning afternoon evening noon midnight " +
		"january february march april june july august september october november december jan feb apr jun jul aug sep sept oct nov dec") {
		timeWords[w] = true
	}
}

// stem is w's Snowball (Porter2) stem: "meetings" and "meeting",
// "emailed" and "email" meet.
func stem(w string) string {
	if s, ok := stems.Load(w); ok {
		return s.(string)
	}
	s := english.Stem(w, false)
	stems.Store(w, s)
	return s
}

// stems remembers the stems computed: the vocabulary is small, and the
// stemmer is the index's main cost.
var stems sync.Map

var stop = map[string]bool{
	"the": true, "a": true, "an": true, "to": true, "of": true, "and": true, "or": true, "in": true, "on": true, "for": true,
	"my": true, "me": true, "is": true, "it": true, "this": true, "that": true, "with": true, "from": true, "by": true,
	"be": true, "can": true, "you": true, "please": true, "who": true, "do": true, "i": true, "im": true, "i'm": true,
	"at": true, "as": true, "are": true, "was": true, "our": true, "us": true, "your": true, "its": true,
	"have": true, "has": true, "had": true, "will": true, "would": true, "could": true, "should": true, "there": true,
	"then": true, "them": true, "they": true, "these": true, "those": true, "so": true, "but": true, "if": true, "into": true,
	"about": true, "up": true, "out": true, "all": true, "any": true, "some": true, "just": true, "now": true, "also": true,
	"yet": true, "ok": true, "go": true, "ahead": true, "get": true, "got": true, "one": true, "let": true, "need": true,
	"want": true, "like": true, "tell": true, "give": true, "been": true, "did": true, "does": true, "what": true,
	"whats": true, "which": true, "where": true, "when": true, "how": true, "s": true, "t": true, "don": true, "next": true,
	"re": true, "ll": true, "ve": true,
}

// synonyms widen a query's words to the words the tools use, at
// synonymWeight.
var synonyms = map[string][]string{
	"email": {"mail", "gmail", "message"}, "mail": {"gmail", "email"}, "inbox": {"gmail", "mail"}, "unread": {"gmail", "search"},
	"meeting": {"event", "calendar"}, "appointment": {"event", "calendar"}, "agenda": {"calendar", "event"}, "plan": {"event"},
	"gap": {"free", "freebusy"}, "free": {"freebusy"}, "available": {"freebusy"}, "slot": {"freebusy", "free"},
	"reschedule": {"update", "event"}, "cancel": {"delete"}, "call": {"event"},
	"spreadsheet": {"sheet", "sheets"}, "workbook": {"sheet", "sheets"}, "cell": {"sheet", "range"}, "row": {"sheet", "range"},
	"column": {"sheet", "range"}, "tab": {"sheet"}, "table": {"sheet"}, "total": {"read", "sheet"},
	"doc": {"docs", "document"}, "document": {"docs", "doc"},
	"remove": {"delete", "trash"}, "bin": {"trash"}, "throw": {"trash", "delete"},
	"remind": {"schedule", "task"}, "reminder": {"scheduled", "task"}, "later": {"scheduled", "task"},
	"every": {"scheduled", "task", "interval"}, "daily": {"cron", "scheduled"}, "weekly": {"cron", "scheduled"},
	"remember": {"memory", "save"}, "forget": {"memory"}, "recall": {"memory"}, "mind": {"memory", "remember"},
	"said": {"history", "search"}, "earlier": {"history"}, "discuss": {"history", "conversation"}, "talk": {"history", "conversation"},
	"decid": {"history"}, "conversation": {"history"}, "mention": {"history"},
	"website": {"web", "page"}, "page": {"web", "fetch"}, "google": {"search", "web"}, "internet": {"web"}, "online": {"web"},
	"url": {"web", "fetch"}, "link": {"web", "fetch"}, "news": {"web", "search"}, "weather": {"web", "search"},
	"rate": {"web", "search"}, "price": {"web", "search"},
	"api": {"http", "request"}, "endpoint": {"http", "request"}, "webhook": {"http", "request"}, "json": {"http", "request"},
	"picture": {"image", "png"}, "photo": {"image"}, "run": {"exec", "command"}, "command": {"exec"}, "script": {"exec"},
	"away": {"vacation"}, "holiday": {"vacation"}, "label": {"labels"}, "tag": {"labels"}, "answer": {"reply"},
	"respond": {"reply"}, "time": {"current", "time"}, "date": {"current", "time"}, "day": {"current", "time"},
	"name": {"agent", "config"}, "formal": {"agent", "prompt"}, "shorter": {"agent", "prompt"}, "tone": {"agent", "prompt"},
	"disable": {"tool", "settings"}, "enable": {"tool", "settings"}, "switch": {"settings"},
	"upload": {"create", "file"}, "attachment": {"files"}, "todo": {"task", "tasks"}, "survey": {"form"}, "questionnaire": {"form"},
	"poll": {"form"}, "rsvp": {"form"}, "deck": {"presentation", "slides"}, "presentation": {"slides"}, "slide": {"slides"},
	"phone": {"contact"}, "number": {"contact", "phone"}, "done": {"complete"}, "tick": {"complete"},
	// Verbs, to the verbs tool names use.
	"look": {"search"}, "locat": {"search"}, "seek": {"search"}, "hunt": {"search"},
	"view": {"read", "get"}, "display": {"read", "list"}, "open": {"read"}, "see": {"read", "get"},
	"everyon": {"list"}, "make": {"create"}, "start": {"create"}, "add": {"create"}, "put": {"create", "add"},
	"edit": {"update"}, "modifi": {"update"}, "fix": {"update", "replace"}, "adjust": {"update"}, "correct": {"replace", "update"},
	"eras": {"delete"}, "discard": {"delete", "trash"}, "rid": {"delete", "trash"},
	"notifi": {"send"}, "inform": {"send"},
}

// expand weighs a query's words, adding their synonyms at synonymWeight.
func expand(words []string) map[string]float64 {
	out := map[string]float64{}
	for _, w := range words {
		out[w] = 1
	}
	for _, w := range words {
		for _, s := range synonyms[w] {
			s = stem(s)
			if _, ok := out[s]; !ok {
				out[s] = synonymWeight
			}
		}
	}
	return out
}
