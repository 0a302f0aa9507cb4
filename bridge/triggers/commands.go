package triggers

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"loadout/bridge"
	"loadout/chat"
)

// Place is where the commands need to know a chat: whether it is one
// person's (bridge.Hub.Private).
type Place interface {
	Private(chatKey string) bool
}

// Commands registers /trigger on router: a person makes, lists and
// removes the triggers of their own private chat. base is the address
// people reach loadout's HTTP server at (ui.base_url), "" when unknown.
func (h *Hooks) Commands(router *bridge.Router, place Place, base string) {
	router.Register(bridge.Command{Name: "trigger", Args: "new <name> <prompt> | list | remove <name>",
		Help: "make a URL that starts a turn in this chat when something outside calls it (a GitHub webhook, say)",
		Run: func(ctx context.Context, in chat.Inbound, args string) (string, error) {
			verb, rest, _ := strings.Cut(strings.TrimSpace(args), " ")
			rest = strings.TrimSpace(rest)
			switch verb {
			case "new":
				return h.make(ctx, in, place, base, rest)
			case "list":
				return h.list(ctx, in, base)
			case "remove":
				return h.remove(ctx, in, rest)
			}
			return "Usage: /trigger new <name> <prompt>, /trigger list, or /trigger remove <name>.", nil
		}})
}

// make keeps a new trigger for the person's private chat and shows its
// secret, once.
func (h *Hooks) make(ctx context.Context, in chat.Inbound, place Place, base, args string) (string, error) {
	if h.store == nil {
		return "Triggers cannot be made here: this deployment keeps no store for them.", nil
	}
	if !place.Private(in.ChatKey) {
		return "Make a trigger in a private chat with me: its secret is shown there, once.", nil
	}
	name, prompt, _ := strings.Cut(args, " ")
	name, prompt = strings.ToLower(strings.TrimSpace(name)), strings.TrimSpace(prompt)
	if !ValidName(name) {
		return "Give the trigger a name of up to 40 letters, digits, - and _, then its instruction: /trigger new deploys Tell me what changed in this deploy.", nil
	}
	if p := promptProblem(prompt); p != "" {
		return "The instruction " + p + ": /trigger new " + name + " Tell me what this event says.", nil
	}
	if _, ok := h.config[name]; ok {
		return fmt.Sprintf("The name %q is taken; choose another.", name), nil
	}
	mine, err := h.store.Triggers(ctx, in.UserKey)
	if err != nil {
		return "", err
	}
	if len(mine) >= MaxPerPerson {
		return fmt.Sprintf("You have %d triggers, the most one person may have; remove one first (/trigger remove <name>).", len(mine)), nil
	}
	t := Trigger{Name: name, Secret: newSecret(), Chat: in.ChatKey, User: in.UserKey, Prompt: prompt}
	if err := h.store.SaveTrigger(ctx, t); errors.Is(err, ErrTaken) {
		return fmt.Sprintf("The name %q is taken; choose another.", name), nil
	} else if err != nil {
		return "", err
	}
	return fmt.Sprintf("Trigger %s made. A POST to\n%s\nsigned with this secret starts a turn here with your instruction and the request's body:\n%s\n\n"+
		"This is the only time the secret is shown. In GitHub or Gitea, give the URL as the webhook's Payload URL, application/json, and the secret as its Secret.",
		name, url(base, name), t.Secret), nil
}

func (h *Hooks) list(ctx context.Context, in chat.Inbound, base string) (string, error) {
	if h.store == nil {
		return "You have no triggers.", nil
	}
	mine, err := h.store.Triggers(ctx, in.UserKey)
	if err != nil {
		return "", err
	}
	if len(mine) == 0 {
		return "You have no triggers. Make one in a private chat with /trigger new <name> <instruction>.", nil
	}
	var b strings.Builder
	b.WriteString("Your triggers:")
	for _, t := range mine {
		fmt.Fprintf(&b, "\n%s — %s, into %s: %s", t.Name, url(base, t.Name), t.Chat, t.Prompt)
	}
	return b.String(), nil
}

func (h *Hooks) remove(ctx context.Context, in chat.Inbound, name string) (string, error) {
	name = strings.ToLower(strings.TrimSpace(name))
	if h.store == nil || name == "" {
		return "Usage: /trigger remove <name>.", nil
	}
	ok, err := h.store.RemoveTrigger(ctx, in.UserKey, name)
	if err != nil {
		return "", err
	}
	if !ok {
		return fmt.Sprintf("You have no trigger %q (/trigger list shows yours).", name), nil
	}
	return fmt.Sprintf("Trigger %s removed: its URL starts nothing now.", name), nil
}

// url is a trigger's address.
func url(base, name string) string {
	if base == "" {
		return "/hooks/" + name + " (on loadout's HTTP address)"
	}
	return strings.TrimRight(base, "/") + "/hooks/" + name
}
