package main

import (
	"context"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"loadout/bridge/telegram"
	"loadout/settings"
)

// The README's docker run line enables Telegram from the environment
// alone, on the image's own config file.
func TestImageConfigRunsTelegramFromEnvironment(t *testing.T) {
	cfg, err := settings.Load("../../docker/config.yaml", env(map[string]string{
		"OPENAI_API_KEY":                 "sk-test",
		"TELEGRAM_BOT_TOKEN":             "123:abc",
		"LOADOUT_TELEGRAM_ENABLED":       "true",
		"LOADOUT_TELEGRAM_ALLOWED_USERS": "12345",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if tg := cfg.Section(telegram.Kind()).(telegram.Config); !tg.Enabled || tg.Token != "123:abc" || !slices.Equal(tg.AllowedUsers, []string{"12345"}) ||
		cfg.Store.Path != "/data/loadout.db" || cfg.HTTP.Listen != "0.0.0.0:8080" || cfg.LLM.APIKey != "sk-test" {
		t.Fatalf("image config = %+v", cfg)
	}
	cfg.Store.Path = filepath.Join(t.TempDir(), "x.db")
	a, err := newApp(context.Background(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer a.db.Close()
	chans, err := a.channels(context.Background())
	if err != nil || len(chans) != 1 || chans[0].Name() != "telegram" {
		t.Fatalf("channels = %v, %v", chans, err)
	}
	// Without any variable the image still starts (and says what is missing).
	if _, err := settings.Load("../../docker/config.yaml", env(nil)); err != nil {
		t.Fatalf("image config without environment: %v", err)
	}
	// The Dockerfile uses that file and checks health with the binary.
	df, err := os.ReadFile("../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"COPY docker/config.yaml /etc/loadout/config.yaml", `CMD ["/usr/local/bin/loadout", "health"]`, "--mount=type=cache"} {
		if !strings.Contains(string(df), want) {
			t.Errorf("Dockerfile lacks %q", want)
		}
	}
}

func TestHealthCommand(t *testing.T) {
	a, ln := bareApp(t)
	stop := startRun(t, a, ln, nil)
	path := filepath.Join(t.TempDir(), "c.yaml")
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	os.WriteFile(path, []byte("http:\n  listen: 0.0.0.0:"+port+"\nstore:\n  path: "+a.cfg.Store.Path+"\n"), 0o600)
	out, errOut, err := cliRun(t, "", "health", "-config", path)
	if err != nil || strings.TrimSpace(out) != "ok" {
		t.Fatalf("health of a running server: %v %q %q", err, out, errOut)
	}
	stop()
	if _, _, err := cliRun(t, "", "health", "-config", path); err == nil || !strings.Contains(err.Error(), "does not answer") {
		t.Fatalf("health of a stopped server: %v", err)
	}
}
