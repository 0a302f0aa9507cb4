package bridge

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"loadout/chat"
)

// Connector is an account at a service that a person connects from
// chat, with /connect <name>, and forgets with /disconnect <name>: their
// Google account, their account at an MCP service.
type Connector struct {
	// Name is the command's argument, e.g. "google".
	Name string
	// Help says what it connects: "your Google account".
	Help string
	// Hidden: the service is not set up here; the commands answer it
	// but /help does not list them for it.
	Hidden              bool
	Connect, Disconnect func(ctx context.Context, in chat.Inbound) (string, error)
}

// AddConnector adds c to /connect and /disconnect (one of the same name
// is replaced). Call it before the router handles messages.
func (r *Router) AddConnector(c Connector) {
	if i := slices.IndexFunc(r.connectors, func(o Connector) bool { return o.Name == c.Name }); i >= 0 {
		r.connectors[i] = c
	} else {
		r.connectors = append(r.connectors, c)
	}
	var names, helps []string
	hidden := true
	for _, c := range r.connectors {
		names = append(names, c.Name)
		if !slices.Contains(helps, c.Help) {
			helps = append(helps, c.Help)
		}
		hidden = hidden && c.Hidden
	}
	args := strings.Join(names, "|")
	for _, verb := range []string{"connect", "disconnect"} {
		r.Register(Command{Name: verb, Args: args, Help: verb + " " + strings.Join(helps, " or "), Hidden: hidden,
			Run: func(ctx context.Context, in chat.Inbound, arg string) (string, error) {
				i := slices.IndexFunc(r.connectors, func(c Connector) bool { return strings.EqualFold(c.Name, strings.TrimSpace(arg)) })
				switch {
				case i < 0:
					return fmt.Sprintf("Usage: /%s %s", verb, args), nil
				case verb == "connect":
					return r.connectors[i].Connect(ctx, in)
				}
				return r.connectors[i].Disconnect(ctx, in)
			}})
	}
}
