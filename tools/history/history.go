// Package history provides search_history: full-text search over this
// chat's past conversations, closed ones included, returning dated
// snippets. It never reads another chat's history.
package history

import (
	"context"
	"fmt"
	"strings"
	"time"

	"loadout/tools"
)

// Hit is one message found.
type Hit struct {
	SessionID int64     `json:"conversation"`
	At        time.Time `json:"at"`
	Role      string    `json:"from"`
	Snippet   string    `json:"snippet"`
}

// Found is what a search found, and whether meaning took part.
type Found struct {
	Hits    []Hit
	Meaning tools.Meaning
}

// Searcher finds messages of one chat, by words, and by meaning too
// when embeddings are on.
type Searcher interface {
	SearchHistory(ctx context.Context, chatKey, query string, limit int) (Found, error)
}

type input struct {
	Query string `json:"query" desc:"words to look for in earlier conversations"`
	Limit int    `json:"limit,omitempty" desc:"most results, default 10"`
}

type output struct {
	Query   string `json:"query"`
	Results []Hit  `json:"results"`
	Note    string `json:"note,omitempty"`
}

// Tool returns search_history.
func Tool(s Searcher) tools.Tool {
	return tools.New(tools.Definition{
		Name:        "search_history",
		Examples:    []string{"remind me what we discussed about something", "what did we decide before", "what did we talk about before", "find something I mentioned in an earlier conversation", "what did we agree on last time", "what did you tell me last time about it", "that recipe you gave me a while back", "look through our past chats for the address", "when did I first ask you about the trip", "which hotel did we pick in our earlier chat", "something I said in a previous conversation", "that thing we chatted about yesterday", "what name did we come up with before", "did I already ask you about this", "our old conversation about the holiday", "you told me about a restaurant once, which was it", "what did I say about my holiday plans earlier"},
		Description: "Search this chat's earlier conversations, including cleared ones; dated snippets.",
		ReadOnly:    true, Untrusted: true,
		Timeout: 10 * time.Second,
	}, func(ctx context.Context, in input) (any, error) {
		chatKey := tools.CallerFrom(ctx).ChatKey
		if chatKey == "" {
			return nil, fmt.Errorf("search_history: no chat in the context")
		}
		q := strings.TrimSpace(in.Query)
		if q == "" {
			return nil, &tools.Error{Code: tools.CodeMissingParameter, Message: "'query' is required.",
				Suggestion: "Give the words to look for, e.g. budget decision.", Details: map[string]any{"required_param": "query"}}
		}
		if len(tools.SearchTerms(q)) == 0 {
			return nil, &tools.Error{Code: tools.CodeInvalidArgument, Message: "The query has no words to look for.",
				Suggestion: "Search with words, e.g. budget decision."}
		}
		limit := in.Limit
		if limit <= 0 || limit > 50 {
			limit = 10
		}
		f, err := s.SearchHistory(ctx, chatKey, q, limit)
		if err != nil {
			return nil, err
		}
		out := output{Query: q, Results: f.Hits}
		if f.Hits == nil {
			out.Results = []Hit{}
		}
		switch {
		case f.Meaning == tools.MeaningUnavailable && f.Hits == nil:
			out.Note = "Nothing found by these words; search by meaning is unavailable right now, so it may have been said in other words. Try other or fewer words."
		case f.Meaning == tools.MeaningUnavailable:
			out.Note = "Matched by words only: search by meaning is unavailable right now."
		case f.Meaning == tools.MeaningUsed && f.Hits == nil:
			out.Note = "Nothing found by words or meaning."
		case f.Hits == nil:
			out.Note = "Nothing found. Try other or fewer words."
		}
		return out, nil
	})
}

// Register adds the history group: searching earlier conversations.
func Register(reg *tools.Registry, s Searcher) error {
	return reg.AddGroup(tools.Group{Name: "history", DisplayName: "History", Description: "Search earlier conversations"}, Tool(s))
}
