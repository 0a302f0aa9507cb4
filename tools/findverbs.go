package tools

import (
	"strings"
	"sync"
	"unicode"
)

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

var verbKind = sync.OnceValue(func() map[int]int {
	return map[int]int{
		verbSearch: kindRead, verbList: kindRead, verbRead: kindRead, verbExport: kindRead,
		verbCreate: kindChange, verbUpdate: kindChange, verbMove: kindChange, verbReplace: kindChange, verbShare: kindChange, verbArchive: kindChange,
		verbDelete: kindDelete,
		verbSend:   kindSend, verbReply: kindSend,
	}
})

// requestVerbs are the words people use for each verb; the first one
// in a request says what it asks for. Question words ask to look,
// without saying how.
var requestVerbs = sync.OnceValue(func() map[string]int {
	return verbWords(map[int]string{
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
	})
})

// verbWords maps each word of each verb's list to the verb.
func verbWords(lists map[int]string) map[string]int {
	out := map[string]int{}
	for verb, words := range lists {
		for _, w := range strings.Fields(words) {
			out[w] = verb
		}
	}
	return out
}

// questionWords ask to look.
var questionWords = sync.OnceValue(func() map[string]bool {
	return map[string]bool{"what": true, "whats": true, "who": true, "how": true, "is": true, "are": true,
		"do": true, "does": true, "where": true, "when": true, "am": true, "was": true, "were": true, "have": true, "can": true}
})

// toolVerbs are what the words of a tool's name say it does.
var toolVerbs = sync.OnceValue(func() map[string]int {
	return map[string]int{
		"search": verbSearch, "list": verbList, "groups": verbList, "responses": verbList, "freebusy": verbSearch,
		"read": verbRead, "get": verbRead, "info": verbRead, "comments": verbRead, "response": verbRead, "render": verbRead,
		"create": verbCreate, "add": verbCreate, "insert": verbCreate,
		"update": verbUpdate, "modify": verbUpdate, "set": verbUpdate, "write": verbUpdate,
		"move": verbMove, "replace": verbReplace, "share": verbShare, "archive": verbArchive, "export": verbExport,
		"delete": verbDelete, "trash": verbDelete, "clear": verbDelete, "unshare": verbDelete,
		"send": verbSend, "reply": verbReply,
	}
})

// actionOf is what a tool does: the first verb of its name; reading
// for a read-only tool whose name has none (pdf_text reads a PDF's
// text), and any kind for the rest (a tool with actions: files,
// memory, scheduled_tasks…).
func actionOf(d Definition) action {
	for _, w := range strings.Split(d.Name, "_") {
		if v, ok := toolVerbs()[w]; ok {
			return action{verbKind()[v], v}
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
			if v, ok := phrasalVerbs()[w+" "+words[i+1]]; ok {
				return action{verbKind()[v], v}
			}
		}
		if v, ok := requestVerbs()[w]; ok && !lookHow()[w] && (!nounsToo()[w] || i == 0 || beforeVerb()[words[i-1]]) {
			return action{verbKind()[v], v}
		}
		if questionWords()[w] || lookHow()[w] {
			for _, w := range words {
				if v, ok := lookWords()[w]; ok {
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
var phrasalVerbs = sync.OnceValue(func() map[string]int {
	return map[string]int{"get rid": verbDelete, "get back": verbReply, "write back": verbReply, "set up": verbCreate,
		"look up": verbSearch, "look for": verbSearch, "look through": verbSearch, "throw away": verbDelete, "throw out": verbDelete,
		"take off": verbDelete, "take out": verbDelete, "fill in": verbUpdate, "call off": verbDelete, "turn off": verbUpdate,
		"turn on": verbUpdate, "switch off": verbUpdate, "switch on": verbUpdate, "give access": verbShare, "check for": verbSearch}
})

// nounsToo are verbs that are as often nouns ("the trip plan", "my
// email"): they are the request's verb only where a verb stands, first
// or after "please", "to", "you", "and"…
var nounsToo = sync.OnceValue(func() map[string]bool {
	return wordSet("plan log record note text message mail email book label tag star flag mark set schedule " +
		"share draft answer clear empty drop stop list search turn switch fill start new change update reply forward check")
})

// beforeVerb are the words after which a verb stands.
var beforeVerb = sync.OnceValue(func() map[string]bool {
	return map[string]bool{"please": true, "pls": true, "and": true, "then": true, "to": true, "you": true, "just": true,
		"also": true, "now": true, "s": true, "can": true, "could": true, "will": true, "would": true, "i": true, "me": true}
})

// lookHow are the verbs of looking that do not say how ("show me").
var lookHow = sync.OnceValue(func() map[string]bool {
	return map[string]bool{"show": true, "see": true, "view": true, "display": true, "check": true}
})

// lookWords say how to look.
var lookWords = sync.OnceValue(func() map[string]int {
	return map[string]int{"all": verbList, "every": verbList, "everyone": verbList, "everything": verbList, "each": verbList, "list": verbList,
		"where": verbSearch, "any": verbSearch, "anything": verbSearch, "anyone": verbSearch, "there": verbSearch, "find": verbSearch, "search": verbSearch, "look": verbSearch,
		"say": verbRead, "says": verbRead, "said": verbRead, "whole": verbRead, "full": verbRead, "read": verbRead, "open": verbRead, "details": verbRead}
})

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
