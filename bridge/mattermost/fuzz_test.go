package mattermost

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"loadout/bridge"
	"loadout/bridge/mattermost/mattermosttest"
	"loadout/store/storetest"
)

// fuzzAdapter judges posts as the running channel does, with ana (by
// id) and bea (by username, already read) allowed; it is never run, and
// the server it would ask for other usernames refuses connections.
func fuzzAdapter(t testing.TB) *Adapter {
	env := storetest.NewEnv(t, storetest.Options{})
	a := New(Config{URL: "http://127.0.0.1:1", Token: mattermosttest.Token, AllowedUsers: []string{ana.ID, "bea"},
		Delivery: bridge.Delivery{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}}, bridge.NewRouter(env.Engine, "loadout"), env.Store)
	a.self, a.name = mattermosttest.Bot.ID, mattermosttest.Bot.Name
	a.names[bea.ID] = named{name: "bea", at: time.Now().Add(time.Hour)}
	return a
}

// event is a posted event with a post of its own JSON.
func postedEvent(kind, postJSON string) string {
	b, _ := json.Marshal(map[string]any{"channel_type": kind, "post": postJSON})
	return string(b)
}

// FuzzPostedEvent feeds websocket event data to the parser and the
// judge: nothing panics, only an allowed person's text reaches the
// handler, under their key, and a refusal carries none of the text.
func FuzzPostedEvent(f *testing.F) {
	f.Add(postedEvent("D", `{"id":"p1","user_id":"`+ana.ID+`","channel_id":"`+mattermosttest.ID("dm")+`","message":"hello"}`))
	f.Add(postedEvent("O", `{"id":"p2","user_id":"`+bea.ID+`","channel_id":"c1","root_id":"r","message":"@loadout !clear"}`))
	f.Add(postedEvent("O", `{"id":"p3","user_id":"`+mallory.ID+`","channel_id":"c1","message":"@loadout let me in"}`))
	f.Add(postedEvent("D", `{"id":"p4","user_id":"`+ana.ID+`","channel_id":"c1","message":"","file_ids":["f1"],"metadata":{"files":[{"id":"f1","name":"../../x","size":-1}]}}`))
	f.Add(postedEvent("G", `{"id":"p5","user_id":"`+ana.ID+`","channel_id":"c1","type":"system_join_channel","message":"@loadout"}`))
	f.Add(`{"post":"{\"id\":\"p6\",\"user_id\":\"` + ana.ID + `\",\"channel_id\":\"c\",\"props\":{\"from_bot\":\"true\"},\"message\":\"hi\"}"}`)
	f.Add(`{"post": 5}`)
	a := fuzzAdapter(f)
	f.Fuzz(func(t *testing.T, data string) {
		p, kind, ok := postOf([]byte(data))
		if !ok {
			return
		}
		pend, ok := a.judge(context.Background(), p, kind)
		if !ok {
			return
		}
		in := pend.Inbound
		if pend.Reply != "" && (in.Text != "" || in.UserKey != "") {
			t.Fatalf("a reply without a turn carries the person's post: %+v", in)
		}
		if in.Text == "" {
			if pend.Reply == "" {
				t.Fatalf("accepted with neither text nor reply: %+v", pend)
			}
			return
		}
		if p.UserID != ana.ID && p.UserID != bea.ID {
			t.Fatalf("a stranger's text %q goes to the handler", in.Text)
		}
		if in.UserKey != "mattermost:"+p.UserID || strings.TrimSpace(in.Text) == "" {
			t.Fatalf("user key %q, text %q", in.UserKey, in.Text)
		}
		if _, err := a.ReadRoute(pend.Route); err != nil {
			t.Fatalf("an unreadable route %q", pend.Route)
		}
	})
}

// FuzzAddressed: finding the mention takes linear time and keeps the
// text otherwise.
func FuzzAddressed(f *testing.F) {
	f.Add("loadout", "@loadout hi")
	f.Add("a", strings.Repeat("@a", 1000))
	f.Add("İ", "@İİ @i̇ x")
	f.Fuzz(func(t *testing.T, name, text string) {
		got, ok := addressed(name, text)
		if ok && len(got) > len(text) {
			t.Fatalf("addressed(%q, %q) grew the text to %q", name, text, got)
		}
	})
}

// A long post full of near mentions is judged in linear time.
func TestAddressedIsLinear(t *testing.T) {
	text := strings.Repeat("@loadou", 200000) + " @loadout"
	start := time.Now()
	if _, ok := addressed("loadout", text); !ok {
		t.Fatal("the mention at the end was missed")
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("%s for 1.4 MB", d)
	}
}
