// Package bridge holds what every channel shares: the delivery pipeline
// and the inbox it keeps (persist, acknowledge, run in per-chat order,
// send in parts, resume after a restart), the command layer (/start,
// /help, /clear, /status and commands other parts register), the
// allowlist with its one-time refusal, and splitting long replies.
package bridge

import (
	"cmp"
	"context"
	"fmt"
	"strings"
	"time"

	"loadout/chat"
	"loadout/tools"
)

// Sentences people see when something fails on loadout's side.
const (
	// TextNotSaved is shown when a message could not even be stored.
	TextNotSaved = "Sorry, something went wrong on my side and your message was not saved. Please try again in a moment."
	// TextRetrying is sent when a turn failed and its message is kept to
	// be tried again.
	TextRetrying = "Sorry, something went wrong on my side. Your message is saved and I'll answer it as soon as I can."
	// TextFailed is sent when a message could not be answered and will not
	// be tried again.
	TextFailed = "Sorry, something went wrong on my side and I couldn't answer that message. Please send it again."
	// TextQuarantined is sent, once, for a message set aside because
	// handling it stopped the service each time; %s is its reference,
	// which the operator finds in the log.
	TextQuarantined = "Sorry, I couldn't handle that message: trying to stopped me more than once, so I've set it aside (reference %s). Please send it again in other words, or without the file; the reference helps my operator find out why."
	// TextRefused is the one refusal an unknown user receives.
	TextRefused = "Sorry, I only talk to people my owner has allowed. Ask them to add you."
	// TextCut ends an answer that was longer than a reply may be.
	TextCut = "\n\n[The answer was too long and was cut here.]"
)

// Command is a slash command. Run receives the text after the command name.
type Command struct {
	Name string // without the slash
	// Args is a short usage hint, e.g. "google".
	Args string
	Help string
	// Hidden commands answer when typed but are not listed by /help and
	// /start: a command that does not work in this deployment.
	Hidden bool
	Run    func(ctx context.Context, in chat.Inbound, args string) (string, error)
	// Reply, when set, is run instead of Run: a command whose answer may
	// ask for an approval (/approve carries the turn on, which may ask
	// again).
	Reply func(ctx context.Context, in chat.Inbound, args string) (chat.Reply, error)
}

// Router sends a message to its command or, if it is not one, to the
// engine. It is safe for concurrent use once commands are registered.
type Router struct {
	engine   *chat.Engine
	name     string
	now      func() time.Time
	commands map[string]Command
	order    []string
	// connectors are the accounts /connect and /disconnect name.
	connectors []Connector
	// statuses add lines to /status (the connected Google account).
	statuses []func(ctx context.Context, in chat.Inbound) (string, error)
}

// AddStatus adds a line to /status: f's answer for the person asking, ""
// for none. Call it before channels start.
func (r *Router) AddStatus(f func(ctx context.Context, in chat.Inbound) (string, error)) {
	r.statuses = append(r.statuses, f)
}

// NewRouter returns a router with the built-in commands. name is the
// assistant's name used in greetings.
func NewRouter(engine *chat.Engine, name string) *Router {
	if name == "" {
		name = "loadout"
	}
	r := &Router{engine: engine, name: name, now: time.Now, commands: map[string]Command{}}
	r.Register(Command{Name: "start", Help: "introduction", Run: r.start})
	r.Register(Command{Name: "help", Help: "list the commands", Run: r.help})
	r.Register(Command{Name: "clear", Help: "start a new conversation (unloads every tool group)", Run: r.clear})
	r.Register(Command{Name: "status", Help: "show this conversation's size, loaded tool groups, token use and what waits for your approval", Run: r.status})
	r.Register(Command{Name: "approve", Help: "let me go ahead with what I asked you to approve", Reply: r.decide(true)})
	r.Register(Command{Name: "deny", Help: "stop what I asked you to approve", Reply: r.decide(false)})
	r.Register(Command{Name: "always", Args: "#code", Help: "approve, and always allow what the question showed, from now on", Reply: r.always})
	r.Register(Command{Name: "rules", Args: "[remove #code]", Help: "list your rules (what I may do without asking), or remove one", Run: r.rules})
	r.Register(Command{Name: "audit", Help: "list the recent decisions on what I did or wanted to do here", Run: r.audit})
	// A question a running tool asked is answered as it arrives (see
	// Pipeline); these answer when none waits.
	none := func(context.Context, chat.Inbound, string) (string, error) { return textNoQuestion, nil }
	r.Register(Command{Name: "answer", Hidden: true, Run: none})
	// A /cancel of the turn running in the chat is taken as it arrives
	// (Pipeline); this answers one that found nothing to stop.
	r.Register(Command{Name: "cancel", Help: "stop what I am doing here (sub-agents included), or a question I asked",
		Run: func(context.Context, chat.Inbound, string) (string, error) { return textNothingToCancel, nil }})
	return r
}

// decide answers the chat's pending approval (or the one named) for the
// approve and deny commands, which the channels' buttons send too.
func (r *Router) decide(approve bool) func(ctx context.Context, in chat.Inbound, args string) (chat.Reply, error) {
	return func(ctx context.Context, in chat.Inbound, args string) (chat.Reply, error) {
		return r.engine.Decide(ctx, in, strings.TrimSpace(args), approve)
	}
}

// always answers /always #code, which the "Always allow" buttons send too.
func (r *Router) always(ctx context.Context, in chat.Inbound, args string) (chat.Reply, error) {
	return r.engine.Always(ctx, in, strings.TrimSpace(args))
}

// rules answers /rules and /rules remove #code.
func (r *Router) rules(ctx context.Context, in chat.Inbound, args string) (string, error) {
	verb, rest, _ := strings.Cut(strings.TrimSpace(args), " ")
	switch strings.ToLower(verb) {
	case "":
		return r.engine.RulesText(ctx, in)
	case "remove", "delete":
		return r.engine.RemoveRule(ctx, in, rest)
	}
	return "Use /rules to list your rules, or /rules remove #code to remove one.", nil
}

// audit answers /audit.
func (r *Router) audit(ctx context.Context, in chat.Inbound, _ string) (string, error) {
	return r.engine.AuditText(ctx, in)
}

// Answerable reports whether userKey may answer approval id of chatKey
// now (see chat.Engine.Answerable): channels check a button press with
// it before taking it.
func (r *Router) Answerable(ctx context.Context, chatKey, userKey, id string) (chat.Answerable, error) {
	return r.engine.Answerable(ctx, chatKey, userKey, id)
}

// Register adds a command, replacing one of the same name. Call it before
// channels start.
func (r *Router) Register(c Command) {
	if _, ok := r.commands[c.Name]; !ok {
		r.order = append(r.order, c.Name)
	}
	r.commands[c.Name] = c
}

// Commands returns the commands in registration order.
func (r *Router) Commands() []Command {
	out := make([]Command, len(r.order))
	for i, n := range r.order {
		out[i] = r.commands[n]
	}
	return out
}

// Handle answers one inbound message. An error means the store failed;
// the delivery pipeline keeps the message and tries again.
func (r *Router) Handle(ctx context.Context, in chat.Inbound) (chat.Reply, error) {
	name, args, ok := ParseCommand(in.Text)
	if !ok {
		return r.engine.Handle(ctx, in)
	}
	c, found := r.commands[name]
	switch {
	case !found:
		return chat.Reply{Text: fmt.Sprintf("I don't know the command /%s. Send /help to see what I understand.", name)}, nil
	case c.Reply != nil:
		return c.Reply(ctx, in, args)
	}
	text, err := c.Run(ctx, in, args)
	return chat.Reply{Text: text}, err
}

// ParseCommand splits "/name@bot args" into name and args. Names are
// lower-cased; a "@bot" suffix is dropped. Text that merely starts with a
// slash, like a path, is not a command.
func ParseCommand(text string) (name, args string, ok bool) {
	text = strings.TrimSpace(text)
	if !strings.HasPrefix(text, "/") {
		return "", "", false
	}
	head, rest, _ := strings.Cut(text[1:], " ")
	if i := strings.IndexAny(head, "\n\t"); i >= 0 {
		rest = head[i+1:] + " " + rest
		head = head[:i]
	}
	head, _, _ = strings.Cut(head, "@")
	if head == "" || len(head) > 32 {
		return "", "", false
	}
	for _, c := range head {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			return "", "", false
		}
	}
	return strings.ToLower(head), strings.TrimSpace(rest), true
}

func (r *Router) start(ctx context.Context, in chat.Inbound, args string) (string, error) {
	// A deep link's payload (Telegram's t.me/<bot>?start=connect) runs
	// what it names.
	if strings.TrimSpace(args) == "connect" {
		if c, ok := r.commands["connect"]; ok {
			return c.Run(ctx, in, "google")
		}
	}
	help, _ := r.help(ctx, in, "")
	name, err := r.engine.Name(ctx, in.ChatKey)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("Hi, I'm %s. Ask me anything; I can also work with your tools and accounts when you ask.\n\n%s", cmp.Or(name, r.name), help), nil
}

func (r *Router) help(context.Context, chat.Inbound, string) (string, error) {
	var b strings.Builder
	b.WriteString("Commands:")
	for _, c := range r.Commands() {
		if c.Hidden {
			continue
		}
		usage := "/" + c.Name
		if c.Args != "" {
			usage += " " + c.Args
		}
		fmt.Fprintf(&b, "\n%s — %s", usage, c.Help)
	}
	return b.String(), nil
}

func (r *Router) clear(ctx context.Context, in chat.Inbound, _ string) (string, error) {
	if _, err := r.engine.Clear(ctx, in.ChatKey); err != nil {
		return "", err
	}
	return "Started a new conversation. Earlier messages and loaded tool groups are no longer in play.", nil
}

func (r *Router) status(ctx context.Context, in chat.Inbound, _ string) (string, error) {
	s, err := r.engine.Status(ctx, in.ChatKey)
	if err != nil {
		return "", err
	}
	loaded := "none"
	switch {
	case len(s.Groups) > 0:
		parts := make([]string, len(s.Groups))
		for i, g := range s.Groups {
			noun := "tools"
			if g.Tools == 1 {
				noun = "tool"
			}
			parts[i] = fmt.Sprintf("%s (%d %s, %s tokens)", g.Name, g.Tools, noun, tools.Thousands(g.Tokens))
		}
		loaded = strings.Join(parts, ", ")
	case len(s.Loaded) > 0:
		loaded = strings.Join(s.Loaded, ", ")
	}
	total := s.Usage.PromptTokens + s.Usage.CompletionTokens
	head := fmt.Sprintf("Conversation open for %s (since %s)", Age(r.now().Sub(s.OpenedAt)), s.OpenedAt.UTC().Format("2006-01-02 15:04 UTC"))
	if s.Messages == 0 {
		head = "No conversation yet: send a message to start one."
	}
	waiting := ""
	for _, f := range r.statuses {
		line, err := f(ctx, in)
		if err != nil {
			return "", err
		}
		if line != "" {
			waiting += "\n" + line
		}
	}
	spend, err := r.spendLines(ctx, in)
	if err != nil {
		return "", err
	}
	waiting += spend
	for _, task := range s.Delegates {
		waiting += "\nSub-agent running: " + task
	}
	for _, a := range s.Approvals {
		// Only the asker's own: in a group, others' requests are
		// theirs to see.
		if a.UserKey != in.UserKey {
			continue
		}
		code := chat.CodeOf(a.ID)
		waiting += fmt.Sprintf("\nWaiting for your approval (until %s): %s %s — /approve %s or /deny %s",
			a.ExpiresAt.UTC().Format("15:04 UTC"), code, a.Summary, code, code)
	}
	return fmt.Sprintf("%s\nMessages: %d\nLoaded tool groups: %s\nActive tools: %d (%s schema tokens per request: core %s + groups %s; routing all would send %d tools, %s tokens)\nTokens used: %s (prompt %s, completion %s), %s of the prompt tokens from the provider's cache\nModel: %s, routing: %s",
		head, s.Messages, loaded, s.ActiveTools, tools.Thousands(s.SchemaTokens), tools.Thousands(s.CoreTokens), tools.Thousands(s.SchemaTokens-s.CoreTokens),
		s.AllTools, tools.Thousands(s.AllTokens),
		tools.Thousands(total), tools.Thousands(s.Usage.PromptTokens), tools.Thousands(s.Usage.CompletionTokens), tools.Thousands(s.Usage.CachedTokens),
		cmp.Or(s.Model, "default"), s.Routing) + waiting, nil
}

// spendLines are /status's lines on spend: what is left under each cap
// for the person asking, and with prices what was spent today.
func (r *Router) spendLines(ctx context.Context, in chat.Inbound) (string, error) {
	a, err := r.engine.Allowance(ctx, in.UserKey, in.ChatKey)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	if a.Priced {
		fmt.Fprintf(&b, "\nSpent today: %.2f by you, %.2f in this chat (at llm.prices)", a.Spent.PersonDay.Cost, a.Spent.ChatDay.Cost)
	}
	if a.Exempt {
		b.WriteString("\nSpend caps: you are an admin and not capped (limits.cap_admins)")
	}
	for _, c := range a.Caps {
		b.WriteString("\n" + c.Line(a.Now))
	}
	return b.String(), nil
}

// Age renders a duration for people: "45s", "12m", "3h 5m", "2d 4h".
func Age(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 24*time.Hour:
		return fmt.Sprintf("%dh %dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd %dh", int(d.Hours())/24, int(d.Hours())%24)
}
