package ui_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"loadout/store"
	"loadout/tools"
	"loadout/ui"
)

// Scale of the benchmark's store: the 10,000 chats and a million
// messages, in SQLite.
const (
	benchChats    = 10000
	benchPerChat  = 100
	benchMessages = benchChats * benchPerChat
)

// seedLarge writes benchChats chats of benchPerChat messages over the
// last 30 days, straight into SQLite in one transaction.
func seedLarge(b *testing.B, db *store.DB, now time.Time) {
	b.Helper()
	sqlDB, err := db.Gorm().DB()
	if err != nil {
		b.Fatal(err)
	}
	tx, err := sqlDB.Begin()
	if err != nil {
		b.Fatal(err)
	}
	sess, err := tx.Prepare(`INSERT INTO sessions (id, chat_key, opened_at, messages, prompt_tokens, completion_tokens, cached_tokens) VALUES (?, ?, ?, ?, ?, ?, 0)`)
	if err != nil {
		b.Fatal(err)
	}
	msg, err := tx.Prepare(`INSERT INTO messages (session_id, role, text, tool_name, status, group_changes, user_key, tokens, prompt_tokens, completion_tokens, cached_tokens, created_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, 10, ?, ?, 0, ?)`)
	if err != nil {
		b.Fatal(err)
	}
	span := 30 * 24 * time.Hour
	for c := 1; c <= benchChats; c++ {
		key := fmt.Sprintf("telegram:%d", c)
		opened := now.Add(-span)
		if _, err := sess.Exec(c, key, opened, benchPerChat, 1000, 200); err != nil {
			b.Fatal(err)
		}
		for m := range benchPerChat {
			at := opened.Add(time.Duration(c*benchPerChat+m) * span / benchMessages)
			role, text, tool, status, groups, user, pt, ct := "user", "hello there, how are you", "", "", "", key, 0, 0
			switch m % 4 {
			case 1:
				role, text, user, pt, ct = "assistant", "fine, thanks: here is what I found", "", 500, 40
			case 2:
				role, text, tool, status, user = "tool", `{"loaded":"files"}`, tools.LoadGroupName, tools.StatusSuccess, ""
				if m == 2 {
					groups = `[{"name":"files"}]`
				}
			}
			if _, err := msg.Exec(c, role, text, tool, status, groups, user, pt, ct, at); err != nil {
				b.Fatal(err)
			}
		}
	}
	if err := tx.Commit(); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkPages times each page of the console on a store of 10,000
// chats and a million messages (SQLite): each must answer within 50 ms.
// The first count of the traffic charts over a million messages is
// timed once, apart (it happens once in a database's life).
func BenchmarkPages(b *testing.B) {
	path := filepath.Join(b.TempDir(), "large.db")
	db, err := store.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	now := time.Now()
	start := time.Now()
	seedLarge(b, db, now)
	b.Logf("seeded %d chats and %d messages in %s", benchChats, benchMessages, time.Since(start).Round(time.Millisecond))
	// The first count, over views, as an upgraded database meets it.
	for views := 1; ; views++ {
		start = time.Now()
		if _, err := db.Traffic(context.Background(), now.Add(-24*time.Hour)); err != nil {
			b.Fatal(err)
		}
		b.Logf("first count of the traffic of %d messages, view %d: %s", benchMessages, views, time.Since(start).Round(time.Millisecond))
		if views*200000 >= benchMessages {
			break
		}
	}

	reg := tools.NewRegistry()
	if err := reg.Add(tools.LoadGroup(reg), tools.FindTools(reg)); err != nil {
		b.Fatal(err)
	}
	c, err := ui.New(ui.Config{Enabled: true, AdminToken: adminToken}, ui.Deps{Store: db, Registry: reg, Listen: "127.0.0.1:8080",
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	mux := http.NewServeMux()
	c.Mount(mux)
	login := httptest.NewRequest(http.MethodPost, "/login", strings.NewReader(url.Values{"token": {adminToken}}.Encode()))
	login.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, login)
	cookies := rec.Result().Cookies()
	if len(cookies) != 1 {
		b.Fatalf("sign-in: %d", rec.Code)
	}
	mid := fmt.Sprintf("telegram:%d", benchChats/2)
	for _, p := range []string{"/", "/chats", "/chats?after=" + mid, "/conversation?key=" + mid, "/approvals",
		"/people", "/person?key=" + mid, "/tools?q=read+a+file", "/config"} {
		b.Run(strings.TrimPrefix(strings.NewReplacer("?", "_", "=", "_", ":", "_", "+", "_").Replace(p), "/"), func(b *testing.B) {
			var slowest time.Duration
			for b.Loop() {
				req := httptest.NewRequest(http.MethodGet, p, nil)
				req.AddCookie(cookies[0])
				rec := httptest.NewRecorder()
				t0 := time.Now()
				mux.ServeHTTP(rec, req)
				slowest = max(slowest, time.Since(t0))
				if rec.Code != http.StatusOK {
					b.Fatalf("%s: %d %s", p, rec.Code, rec.Body.String())
				}
			}
			b.ReportMetric(float64(slowest.Microseconds())/1000, "ms-slowest")
		})
	}
}
