package main

import (
	"context"
	"fmt"
	"reflect"
	"strings"

	"loadout/bridge"
	"loadout/bridge/discord"
	"loadout/bridge/email"
	"loadout/bridge/irc"
	"loadout/bridge/matrix"
	"loadout/bridge/slack"
	"loadout/bridge/telegram"
	"loadout/bridge/webui"
	"loadout/bridge/whatsapp"
	"loadout/config"
	"loadout/store"
)

// channelKinds is the one list of the channels serve runs: each entry is
// a channel package's declaration. The config sections, the logger's
// redaction, the start-up line, the help and the "no channel enabled"
// message are derived from it; nothing else in this command names a
// channel.
func channelKinds() []bridge.Kind {
	return []bridge.Kind{
		telegram.Kind(),
		slack.Kind(),
		discord.Kind(),
		matrix.Kind(),
		whatsapp.Kind(),
		email.Kind(),
		irc.Kind(),
		webui.Kind(),
	}
}

// The store keeps what each channel needs beyond the inbox, for every
// process sharing it.
var (
	_ bridge.Store   = (*store.DB)(nil)
	_ discord.Store  = (*store.DB)(nil)
	_ email.Store    = (*store.DB)(nil)
	_ whatsapp.Store = (*store.DB)(nil)
)

// fileType is the type config.yaml is read into: Config's keys, and one
// section for each channel of kinds, of the channel's own config type.
func fileType(kinds []bridge.Kind) reflect.Type {
	fields := []reflect.StructField{{Name: "Config", Type: reflect.TypeFor[Config](), Tag: `yaml:",inline"`}}
	for i, k := range kinds {
		fields = append(fields, reflect.StructField{
			Name: fmt.Sprintf("Channel%d", i), Type: k.ConfigType(), Tag: reflect.StructTag(fmt.Sprintf("yaml:%q", k.Name())),
		})
	}
	return reflect.StructOf(fields)
}

// loadFile reads raw into cfg and the channels' sections.
func loadFile(raw []byte, getenv func(string) string, cfg *Config) (config.Set, error) {
	kinds := channelKinds()
	v := reflect.New(fileType(kinds))
	v.Elem().Field(0).Set(reflect.ValueOf(*cfg))
	set, err := config.Load(raw, getenv, v.Interface())
	if err != nil {
		return nil, err
	}
	*cfg = v.Elem().Field(0).Interface().(Config)
	cfg.Channels = make(map[string]any, len(kinds))
	for i, k := range kinds {
		cfg.Channels[k.Name()] = v.Elem().Field(i + 1).Interface()
	}
	return set, nil
}

// section is channel k's section of c: what the file said, else the
// zero value of its type.
func (c Config) section(k bridge.Kind) any {
	if s, ok := c.Channels[k.Name()]; ok {
		return s
	}
	return reflect.Zero(k.ConfigType()).Interface()
}

// enabledChannels are the kinds whose section turns them on, in list
// order.
func (c Config) enabledChannels() []bridge.Kind {
	var out []bridge.Kind
	for _, k := range channelKinds() {
		if k.Enabled(c.section(k)) {
			out = append(out, k)
		}
	}
	return out
}

// channelShapes are the credential patterns the channels declare (their
// secrets, their Configs declare: Config.entries).
func channelShapes() []string {
	var out []string
	for _, k := range channelKinds() {
		out = append(out, k.Shapes()...)
	}
	return out
}

// channelNames lists the channels' names, the last after "and" or "or":
// "telegram, slack or discord".
func channelNames(suffix, last string) string {
	return joinNames(channelKinds(), suffix, last)
}

func joinNames(kinds []bridge.Kind, suffix, last string) string {
	names := make([]string, len(kinds))
	for i, k := range kinds {
		names[i] = k.Name() + suffix
	}
	if n := len(names); n > 1 {
		return strings.Join(names[:n-1], ", ") + " " + last + " " + names[n-1]
	}
	return strings.Join(names, "")
}

// exampleUser shows the prefixes of a person's key in the channels:
// "telegram:…, slack:… or discord:…", each followed by the person's id
// in that channel. A channel whose people sign in with another's key
// (the browser chat) gives none.
func exampleUser() string {
	var kinds []bridge.Kind
	for _, k := range channelKinds() {
		if k.UserKeys() {
			kinds = append(kinds, k)
		}
	}
	return joinNames(kinds, ":…", "or")
}

// noChannels is what serve says when no channel is enabled.
func noChannels() string {
	return "no channel is enabled: set " + channelNames(".enabled", "or") + " in the config, or use `loadout chat`"
}

// channels builds the enabled channels and adds them to the hub, which
// mounts their HTTP endpoints.
func (a *app) channels(ctx context.Context) ([]bridge.Channel, error) {
	kinds := a.cfg.enabledChannels()
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
		c, err := k.Build(ctx, a.cfg.section(k), env)
		if err != nil {
			return nil, err
		}
		a.hub.Add(c, a.mux)
		out = append(out, c)
	}
	return out, nil
}
