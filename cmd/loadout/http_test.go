package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"loadout/bridge/telegram/telegramtest"
	"loadout/chat/chattest"
	"loadout/httpd"
	"loadout/settings"
)

func TestHTTPServerLimits(t *testing.T) {
	a, ln := bareApp(t)
	a.limits = httpd.Limits{ReadHeader: 300 * time.Millisecond, Read: time.Second, Write: time.Second, Idle: time.Second, Body: 1 << 10}
	a.mux.HandleFunc("POST /echo", func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.ReadAll(r.Body); err != nil {
			http.Error(w, "too large", http.StatusRequestEntityTooLarge)
			return
		}
		io.WriteString(w, "ok")
	})
	startRun(t, a, ln, nil)
	base := "http://" + ln.Addr().String()
	post := func(n int) int {
		resp, err := http.Post(base+"/echo", "text/plain", bytes.NewReader(make([]byte, n)))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if c := post(100); c != http.StatusOK {
		t.Fatalf("small body: %d", c)
	}
	if c := post(4 << 10); c != http.StatusRequestEntityTooLarge {
		t.Fatalf("body over the limit: %d, want 413", c)
	}
	// Headers that never finish: the server hangs up after the header
	// timeout instead of waiting forever.
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	io.WriteString(conn, "GET /healthz HTTP/1.1\r\nHost: x\r\n")
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	start := time.Now()
	_, err = bufio.NewReader(conn).ReadString('\n')
	if err == nil {
		// Some versions answer 408 before closing; that is fine too.
		t.Logf("server answered a slow request before closing")
	} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatalf("server kept a half-sent request open for %s", time.Since(start))
	}
	// The server still answers others.
	resp, err := http.Get(base + "/healthz")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("healthz after a slow client: %v", err)
	}
	resp.Body.Close()
}

func TestTelegramWebhookRefusesOversizedUpdate(t *testing.T) {
	tg := telegramtest.New(t)
	model := chattest.NewModelServer(t)
	addr, _ := serveTelegram(t, tg, model,
		"  mode: webhook\n  webhook_url: https://bot.example.org/tg/hook\n  webhook_secret: s3cret\n")
	tg.WaitFor(t, "setWebhook", func() bool { return len(tg.Calls("setWebhook")) == 1 })
	body := `{"update_id": 1, "message": {"text": "` + strings.Repeat("x", 2<<20) + `"}}`
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/tg/hook", strings.NewReader(body))
	req.Header.Set("X-Telegram-Bot-Api-Secret-Token", "s3cret")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("oversized update: %d, want 413", resp.StatusCode)
	}
	if n := len(model.Requests()); n != 0 {
		t.Fatalf("the model was called %d times", n)
	}
}

// Profiles are served only when http.pprof asks for them, and only then
// does the runtime sample allocations for heap profiles (startgc).
func TestPprofOnlyWhenAsked(t *testing.T) {
	defer func(rate int) { runtime.MemProfileRate = rate }(runtime.MemProfileRate)
	for _, on := range []bool{false, true} {
		if !on && runtime.MemProfileRate != 0 {
			t.Errorf("pprof off: the runtime samples allocations, one in %d bytes", runtime.MemProfileRate)
		}
		cfg, err := settings.Parse(nil, env(map[string]string{"LOADOUT_HTTP_PPROF": strconv.FormatBool(on)}))
		if err != nil {
			t.Fatal(err)
		}
		cfg.Store.Path = filepath.Join(t.TempDir(), "x.db")
		a, err := newApp(context.Background(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(a.mux)
		for range 64 {
			kept = append(kept, make([]byte, 64<<10))
		}
		runtime.GC() // a heap profile shows the last collection's
		resp, err := http.Get(srv.URL + "/debug/pprof/heap?debug=1")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		srv.Close()
		a.db.Close()
		if want := map[bool]int{false: http.StatusNotFound, true: http.StatusOK}[on]; resp.StatusCode != want {
			t.Errorf("pprof %v: status %d, want %d", on, resp.StatusCode, want)
		}
		// 4 MiB allocated here: about 8 samples at the default rate.
		if on && !strings.Contains(string(body), "TestPprofOnlyWhenAsked") {
			t.Errorf("pprof on: /debug/pprof/heap has no sample of the test's allocations: %.300s", body)
		}
	}
}

// kept holds what TestPprofOnlyWhenAsked allocates for its heap profile.
var kept [][]byte
