package main

import (
	"context"

	"loadout/bridge"
)

// channels builds the enabled channels and adds them to the hub, which
// mounts their HTTP endpoints.
func (a *app) channels(ctx context.Context) ([]bridge.Channel, error) {
	kinds := a.cfg.EnabledChannels()
	if len(kinds) == 0 {
		return nil, nil
	}
	sqlDB, err := a.db.Gorm().DB()
	if err != nil {
		return nil, err
	}
	db := &bridge.SQL{DB: sqlDB, Dialect: a.db.Gorm().Dialector.Name()}
	var out []bridge.Channel
	for _, k := range kinds {
		d, err := a.delivery(k.Name())
		if err != nil {
			return nil, err
		}
		env := bridge.Env{Router: a.router, Store: a.db, Delivery: d, Mux: a.mux, SQL: db, Web: a.web}
		c, err := k.Build(ctx, a.cfg.Section(k), env)
		if err != nil {
			return nil, err
		}
		a.hub.Add(c, a.mux)
		if a.allowed == nil {
			a.allowed = map[string][]string{}
		}
		a.allowed[c.Name()] = k.Allowed(a.cfg.Section(k))
		out = append(out, c)
	}
	return out, nil
}
