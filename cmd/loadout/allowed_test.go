package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"testing"

	"loadout/bridge/whatsapp/whatsapptest"
	"loadout/settings"
)

// The console's overview lists whom each running channel lets in, from
// the channel's declaration: WhatsApp's allowed_numbers too, which a
// look for a field named AllowedUsers missed.
func TestOverviewListsEachChannelsAllowList(t *testing.T) {
	raw := fmt.Sprintf("llm:\n  api_key: sk-test\nstore:\n  path: %s\n"+
		"whatsapp:\n  enabled: true\n  access_token: %s\n  phone_number_id: %q\n  app_secret: %s\n  verify_token: %s\n  allowed_numbers: [\"+15550001111\"]\n",
		filepath.Join(t.TempDir(), "loadout.db"), whatsapptest.Token, whatsapptest.PhoneNumberID, whatsapptest.AppSecret, whatsapptest.VerifyToken)
	cfg, err := settings.Parse([]byte(raw), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	a, err := newApp(context.Background(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer a.db.Close()
	if _, err := a.channels(context.Background()); err != nil {
		t.Fatal(err)
	}
	st := a.status(context.Background())
	if len(st.Channels) != 1 || st.Channels[0].Name != "whatsapp" || !slices.Equal(st.Channels[0].Allowed, []string{"+15550001111"}) {
		t.Fatalf("overview channels %+v, want whatsapp allowing +15550001111", st.Channels)
	}
}
