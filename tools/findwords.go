package tools

import (
	"strings"
	"sync"
	"unicode"

	"github.com/kljensen/snowball/english"
)

// httpMethods are HTTP's verbs as a request writes them: "send a GET".
var httpMethods = sync.OnceValue(func() *strings.Replacer {
	return strings.NewReplacer("GET ", "http request ", "POST ", "http request ", "PUT ", "http request ",
		"PATCH ", "http request ", "DELETE ", "http request ")
})

// contractions are written out, so "won't" is not "won" and "isn't"
// not "isn".
var contractions = sync.OnceValue(func() *strings.Replacer {
	return strings.NewReplacer("won't", "will not", "can't", "can not", "n't", " not", "’", "'",
		"won’t", "will not", "can’t", "can not", "n’t", " not")
})

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
var compounds = sync.OnceValue(func() *strings.Replacer {
	return strings.NewReplacer("to-do", "todo", "to do list", "todo list", "e-mail", "email", "out-of-office", "vacation",
		"out of office", "vacation", "auto reply", "autoreply", "auto-reply", "autoreply", "sign-off", "signature", "google doc", "doc",
		"google sheet", "spreadsheet")
})

// searchWords are text's lowercase words, stemmed by stem, without the
// commonest words.
func searchWords(text string, stem func(string) string) []string {
	var out []string
	if mayHave(text, httpMethodMarks) {
		text = httpMethods().Replace(text)
	}
	text = strings.ToLower(text)
	if strings.IndexByte(text, '\'') >= 0 || strings.Contains(text, "’") {
		text = contractions().Replace(text)
	}
	if mayHave(text, compoundMarks) {
		text = compounds().Replace(text)
	}
	if hasShapes(text) {
		text = replaceShapes(text)
	}
	for _, w := range strings.FieldsFunc(text, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }) {
		if stop()[w] || len(w) < 2 && !isDigits(w) {
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
		if titleBefore()[strings.ToLower(fields[i-1])] {
			continue // a title: "a sheet called Workouts"
		}
		w := strings.TrimRightFunc(strings.TrimSuffix(strings.TrimSuffix(f, "'s"), "’s"), func(r rune) bool { return !unicode.IsLetter(r) })
		if len(w) < 2 || !unicode.IsUpper(rune(w[0])) || !isLetters(w) || strings.ToLower(w[1:]) != w[1:] {
			continue
		}
		if l := strings.ToLower(w); notNames()[l] || timeWords()[l] {
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
var titleBefore = sync.OnceValue(func() map[string]bool {
	return map[string]bool{"called": true, "named": true, "titled": true, "as": true, "label": true, "tab": true}
})

// notNames are capitalised words that name no person.
var notNames = sync.OnceValue(func() map[string]bool {
	return wordSet("google gmail drive docs doc sheets sheet slides slide forms form tasks task calendar contacts contact " +
		"meet markdown csv pdf pdfs office word excel powerpoint json api url http https html png jpg zoom slack telegram whatsapp " +
		"python jq wifi ok english spanish portuguese french german")
})

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
	if timeWords()[w] {
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
var timeWords = sync.OnceValue(func() map[string]bool {
	return wordSet("monday tuesday wednesday thursday friday saturday sunday tue tues thu thurs fri " +
		"today tomorrow tonight yesterday weekend morning afternoon evening noon midnight " +
		"january february march april june july august september october november december jan feb apr jun jul aug sep sept oct nov dec")
})

// wordSet is the set of the words of list.
func wordSet(list string) map[string]bool {
	out := map[string]bool{}
	for _, w := range strings.Fields(list) {
		out[w] = true
	}
	return out
}

// stems are words' Snowball (Porter2) stems ("meetings" and "meeting",
// "emailed" and "email" meet), remembered for one index's vocabulary:
// the stemmer is the index's main cost, and what is kept is bounded by
// the registry's text (a rebuild starts afresh). A request's words are
// looked up, and one the vocabulary lacks is stemmed and not kept, so
// requests never grow it.
type stems map[string]string

// keep is w's stem, remembered.
func (s stems) keep(w string) string {
	if v, ok := s[w]; ok {
		return v
	}
	v := english.Stem(w, false)
	s[w] = v
	return v
}

// of is w's stem, looked up or computed.
func (s stems) of(w string) string {
	if v, ok := s[w]; ok {
		return v
	}
	return english.Stem(w, false)
}

var stop = sync.OnceValue(func() map[string]bool {
	return map[string]bool{
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
})

// synonyms widen a query's words to the words the tools use, at
// synonymWeight.
var synonyms = sync.OnceValue(func() map[string][]string {
	return map[string][]string{
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
})

// expand weighs a query's words, adding their synonyms at synonymWeight.
func expand(words []string, stem func(string) string) map[string]float64 {
	out := map[string]float64{}
	for _, w := range words {
		out[w] = 1
	}
	for _, w := range words {
		for _, s := range synonyms()[w] {
			s = stem(s)
			if _, ok := out[s]; !ok {
				out[s] = synonymWeight
			}
		}
	}
	return out
}
