package settings

import (
	"reflect"

	"loadout/bridge"
	"loadout/bridge/discord"
	"loadout/bridge/email"
	"loadout/bridge/feishu"
	"loadout/bridge/irc"
	"loadout/bridge/matrix"
	"loadout/bridge/mattermost"
	"loadout/bridge/signal"
	"loadout/bridge/slack"
	"loadout/bridge/telegram"
	"loadout/bridge/webui"
	"loadout/bridge/whatsapp"
	"loadout/config"
	"loadout/store"
)

// ChannelKinds is the one list of the channels serve runs: each entry is
// a channel package's declaration. The config sections, the logger's
// redaction, the start-up line, the help and the "no channel enabled"
// message are derived from it; nothing else in the program names a
// channel.
func ChannelKinds() bridge.Kinds {
	return bridge.Kinds{
		telegram.Kind(),
		slack.Kind(),
		discord.Kind(),
		matrix.Kind(),
		mattermost.Kind(),
		whatsapp.Kind(),
		signal.Kind(),
		feishu.Kind(),
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

// loadFile reads raw into cfg and the channels' sections.
func loadFile(raw []byte, getenv func(string) string, cfg *Config) (config.Set, error) {
	kinds := ChannelKinds()
	v := reflect.New(kinds.File(reflect.TypeFor[Config]()))
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

// Section is channel k's section of c: what the file said, else the
// zero value of its type.
func (c Config) Section(k bridge.Kind) any {
	if s, ok := c.Channels[k.Name()]; ok {
		return s
	}
	return reflect.Zero(k.ConfigType()).Interface()
}

// EnabledChannels are the kinds whose section turns them on, in list
// order.
func (c Config) EnabledChannels() []bridge.Kind {
	var out []bridge.Kind
	for _, k := range ChannelKinds() {
		if k.Enabled(c.Section(k)) {
			out = append(out, k)
		}
	}
	return out
}

// NoChannels is what serve says when no channel is enabled.
func NoChannels() string {
	return "no channel is enabled: set " + ChannelKinds().Names(".enabled", "or") + " in the config, or use `loadout chat`"
}
