package tools

import (
	"encoding/json"
	"math"
	"sort"
	"strings"
	"sync"
)

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
	// stems are the vocabulary's, made anew by each build.
	stems stems
	// meaning holds the tools' vectors when find_tools ranks by meaning.
	meaning meaningIndex
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
	// text is what the tool is embedded as (meaningText).
	text     string
	action   action
	catchall bool
	tf       [numFields]map[string]int
	length   [numFields]int
}

type hit struct {
	name, group, desc string
	score             float64
}

// BM25F's saturation.
const bm25k1 = 1.2

// fresh builds the index when the registry changed since. ix.mu held.
func (ix *searchIndex) fresh() {
	if v := ix.reg.Version(); !ix.built || v != ix.version {
		ix.build()
		ix.version, ix.built = v, true
	}
}

// search ranks the tools allowed for q by words and, with sims (each
// tool's cosine with q, from nearest), by meaning too: a tool's score is
// its share of the best word score plus meaningWeight times its share of
// the best cosine above meaningFloor.
func (ix *searchIndex) search(q string, sims map[string]float32, allowed func(name, group string) bool, limit int) []hit {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	ix.fresh()
	named, names := namesAsSomeone(q)
	words := searchWords(named, ix.stems.of)
	if len(words) > maxQueryWords {
		words = words[:maxQueryWords]
	}
	terms := expand(words, ix.stems.of)
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
	if len(sims) > 0 {
		hits = ix.blend(hits, sims, allowed)
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

// build indexes every tool but the catalog's own three.
func (ix *searchIndex) build() {
	defs := ix.reg.All(nil)
	ix.docs, ix.df = make([]searchDoc, 0, len(defs)), make(map[string]int, 2048)
	ix.stems = stems{}
	// What expand widens a request to is stemmed once per build.
	for _, words := range synonyms() {
		for _, w := range words {
			ix.stems.keep(w)
		}
	}
	var total [numFields]int
	groupWords := map[string][]string{}
	for _, d := range defs {
		if d.Name == FindToolsName || d.Name == LoadGroupName || d.Name == UnloadGroupName {
			continue
		}
		doc := searchDoc{name: d.Name, group: d.Group, desc: d.Description, text: meaningText(d), action: actionOf(d), catchall: d.Catchall}
		add := func(f int, text string) {
			if doc.tf[f] == nil {
				doc.tf[f] = make(map[string]int, 16)
			}
			for _, w := range searchWords(text, ix.stems.keep) {
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
				words = searchWords(g.DisplayName+" "+g.Description, ix.stems.keep)
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
		if ix.df[w] > 0 || synonyms()[w] != nil {
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
