// Package memory gives the assistant a memory of each person: short
// notes saved, recalled, searched and forgotten with one tool, kept per
// person (user key) across /clear and restarts, never shown to anyone
// else. The system prompt carries what is remembered about the person
// writing, within a token budget, so the model knows without a call.
package memory

import (
	"context"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"loadout/tools"
)

// Memory is one saved note.
type Memory struct {
	ID        int64     `json:"id"`
	Text      string    `json:"text"`
	CreatedAt time.Time `json:"saved"`
}

// Found is what a search found, and whether meaning took part.
type Found struct {
	Memories []Memory
	Meaning  tools.Meaning
}

// Store keeps memories by person. Search is by words (full-text
// search), and by meaning too when embeddings are on.
type Store interface {
	SaveMemory(ctx context.Context, userKey, text string) (Memory, error)
	RecentMemories(ctx context.Context, userKey string, limit int) ([]Memory, error)
	SearchMemories(ctx context.Context, userKey, query string, limit int) (Found, error)
	ForgetMemory(ctx context.Context, userKey string, id int64) (bool, error)
	CountMemories(ctx context.Context, userKey string) (int, error)
}

// Config configures memory.
type Config struct {
	// MaxItems caps the memories of one person (memory.max_items);
	// default 200.
	MaxItems int `yaml:"max_items"`
	// MaxChars caps one memory (memory.max_chars); default 500.
	MaxChars int `yaml:"max_chars"`
	// PromptTokens bounds the "what I remember about you" block in the
	// system prompt (memory.prompt_tokens); default 300, negative turns
	// the block off.
	PromptTokens int `yaml:"prompt_tokens"`
}

func (c *Config) setDefaults() {
	if c.MaxItems <= 0 {
		c.MaxItems = 200
	}
	if c.MaxChars <= 0 {
		c.MaxChars = 500
	}
	if c.PromptTokens == 0 {
		c.PromptTokens = 300
	}
}

type input struct {
	Action string `json:"action" enum:"save,recall,search,forget"`
	Text   string `json:"text,omitempty" desc:"save: one fact"`
	Query  string `json:"query,omitempty" desc:"search: words"`
	ID     int64  `json:"id,omitempty" desc:"forget: its id"`
}

type list struct {
	Memories []Memory `json:"memories"`
	Total    int      `json:"total,omitempty"`
	Note     string   `json:"note,omitempty"`
}

type saved struct {
	Status string `json:"status"`
	ID     int64  `json:"id"`
}

// Tool returns memory.
func Tool(cfg Config, st Store) tools.Tool {
	cfg.setDefaults()
	return tools.New(tools.Definition{
		Name:        "memory",
		Examples:    []string{"keep in mind something about me", "do you know my partner's name", "remember this about me", "what do you know about me", "forget something you remembered", "note my preference for next time", "store the fact that I live in Porto", "what have you got saved about me", "my birthday is in March, keep that", "don't keep that detail about me anymore", "do you recall where I work", "learn that I'm vegetarian", "update what you know about my address", "I have two kids, Leo and Mia", "my husband is allergic to cats", "note that I prefer morning meetings", "do you remember my birthday", "what's my son's school called", "personal facts you know about me", "keep in mind that my partner is called Sam", "I've told you before where I work, do you remember"},
		Description: "Facts about the person, kept for good.",
		// Each person's memories are their own: a recall in a group is
		// shown on that person's turns only.
		Personal:  true,
		Timeout:   10 * time.Second,
		Summarize: tools.By(summary),
	}, func(ctx context.Context, in input) (any, error) {
		user := tools.CallerFrom(ctx).UserKey
		if user == "" {
			return nil, fmt.Errorf("memory: no person in the context")
		}
		switch in.Action {
		case "save":
			text := strings.Join(strings.Fields(in.Text), " ")
			if text == "" {
				return nil, tools.MissingParameter("memory", "save", "text")
			}
			if n := utf8.RuneCountInString(text); n > cfg.MaxChars {
				return nil, &tools.Error{Code: tools.CodeInvalidArgument, Message: fmt.Sprintf("The memory has %d characters; at most %d fit.", n, cfg.MaxChars),
					Suggestion: "Save the fact in a shorter sentence, or as several."}
			}
			n, err := st.CountMemories(ctx, user)
			if err != nil {
				return nil, err
			}
			if n >= cfg.MaxItems {
				return nil, &tools.Error{Code: "full", Message: fmt.Sprintf("%d memories are saved for this person, the most there may be.", n),
					Suggestion: "Forget ones that no longer matter (recall lists them with ids), then save."}
			}
			m, err := st.SaveMemory(ctx, user, text)
			if err != nil {
				return nil, err
			}
			return saved{Status: "saved", ID: m.ID}, nil
		case "recall":
			ms, err := st.RecentMemories(ctx, user, 50)
			if err != nil {
				return nil, err
			}
			n, err := st.CountMemories(ctx, user)
			if err != nil {
				return nil, err
			}
			return list{Memories: nonNil(ms), Total: n}, nil
		case "search":
			if strings.TrimSpace(in.Query) == "" {
				return nil, tools.MissingParameter("memory", "search", "query")
			}
			if len(tools.SearchTerms(in.Query)) == 0 {
				return nil, &tools.Error{Code: tools.CodeInvalidArgument, Message: "The query has no words to look for.",
					Suggestion: "Search with words, e.g. birthday or coffee."}
			}
			f, err := st.SearchMemories(ctx, user, in.Query, 20)
			if err != nil {
				return nil, err
			}
			return list{Memories: nonNil(f.Memories), Note: SearchNote(f.Meaning, len(f.Memories) == 0)}, nil
		case "forget":
			if in.ID <= 0 {
				return nil, tools.MissingParameter("memory", "forget", "id")
			}
			ok, err := st.ForgetMemory(ctx, user, in.ID)
			if err != nil {
				return nil, err
			}
			if !ok {
				return nil, &tools.Error{Code: tools.CodeNotFound, Message: fmt.Sprintf("There is no memory %d for this person.", in.ID),
					Suggestion: "Use recall or search to find the id."}
			}
			return saved{Status: "forgotten", ID: in.ID}, nil
		}
		return nil, tools.UnknownAction("memory", in.Action, "save", "recall", "search", "forget")
	})
}

// SearchNote is what a search result says of how it searched: that it
// matched words only while search by meaning is unavailable, so a miss
// is not read as "nothing about that"; and, for a miss, what to try.
func SearchNote(how tools.Meaning, none bool) string {
	switch {
	case how == tools.MeaningUnavailable && none:
		return "Nothing found by these words; search by meaning is unavailable right now, so something said in other words may exist. Try other words."
	case how == tools.MeaningUnavailable:
		return "Matched by words only: search by meaning is unavailable right now."
	case how == tools.MeaningUsed && none:
		return "Nothing found by words or meaning."
	case none:
		return "Nothing found by these words. Try other words."
	}
	return ""
}

func nonNil(ms []Memory) []Memory {
	if ms == nil {
		return []Memory{}
	}
	return ms
}

// Prompt returns the system prompt block for userKey: the newest
// memories that fit in cfg.PromptTokens as count measures them, or a
// line saying memory exists when there are none. Store failures leave
// the block out: a turn does not fail for it.
func Prompt(ctx context.Context, cfg Config, st Store, userKey string, count func(string) int) string {
	cfg.setDefaults()
	if cfg.PromptTokens < 0 || userKey == "" {
		return ""
	}
	ms, err := st.RecentMemories(ctx, userKey, cfg.MaxItems)
	if err != nil {
		return ""
	}
	const head = "## What I remember about you\n\nUse the memory tool to save lasting facts the person tells you, and to forget ones they correct."
	if len(ms) == 0 {
		return head + "\nNothing yet."
	}
	var b strings.Builder
	b.WriteString(head)
	used := count(head)
	for i, m := range ms {
		line := fmt.Sprintf("\n- %s (id %d, %s)", m.Text, m.ID, m.CreatedAt.Format("2006-01-02"))
		if used += count(line); used > cfg.PromptTokens {
			fmt.Fprintf(&b, "\n(%d more: search or recall them.)", len(ms)-i)
			break
		}
		b.WriteString(line)
	}
	return b.String()
}

// summary is what a person approves: a memory to keep is shown whole
// (tools.Whole), since it reaches the model in every later turn.
func summary(_ context.Context, in input) string {
	switch in.Action {
	case "save":
		return "Remember for good: " + tools.Whole(in.Text)
	case "forget":
		return fmt.Sprintf("Forget memory %d", in.ID)
	case "search":
		return "Search the memories for " + tools.Whole(in.Query)
	}
	return "Recall the memories"
}
