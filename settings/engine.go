package settings

import (
	"time"

	"loadout/chat"
	"loadout/tools"
)

// Engine is the engine's configuration as the file gives it: llm's
// engine keys, the assistant's name and prompt, the tools' routing,
// catalog budget, approvals and rules, and the spend caps in the
// people's time zone. What the process adds (the model, counting,
// logging, sections, middleware, the ledger) is its own.
func (c Config) Engine() (chat.Config, error) {
	ec := c.LLM.Engine
	ec.Name, ec.SystemPrompt, ec.Routing = c.Agent.Name, c.Agent.SystemPrompt, c.Tools.Routing
	ec.CatalogBudget = c.Tools.CatalogBudget
	ec.Delegation = c.Agent.Delegation
	ec.Confirm = c.Tools.Policy()
	rules, err := tools.OperatorRules(c.Tools.Rules)
	if err != nil {
		return chat.Config{}, err
	}
	ec.Rules = rules
	ec.Admins = tools.NewAdmins(c.Tools.Admins)
	ec.ConfirmTTL = c.Tools.ConfirmTTL.Std()
	ec.Model = c.Model()
	ec.Limits = c.Limits
	ec.Limits.Admins = tools.NewAdmins(c.Tools.Admins)
	if c.Agent.TimeZone != "" {
		// Checked when the config was read.
		ec.Limits.Location, _ = time.LoadLocation(c.Agent.TimeZone)
	}
	return ec, nil
}
