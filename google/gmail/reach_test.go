package gmail_test

import (
	"context"
	"strings"
	"testing"

	"loadout/chat"
	"loadout/google/gmail"
	"loadout/google/googletest"
	"loadout/store/storetest"
	"loadout/tools"
)

// TEST (finding: gmail_reply's scope was read from its body and cc, not
// from whom the reply goes to): through the engine, a reply to Bob whose
// body carries the signature "ana@example.com" offers "Always allow" for
// Bob's domain, the one it goes to, not the signature's; with that rule
// kept, a reply carrying the same signature to a message from
// evil.example is asked and not sent.
func TestReplyIsScopedByWhomItGoesTo(t *testing.T) {
	k := newKit(t)
	k.f.On("GET /gmail/v1/users/me/messages/m-bob", 200, metaJSON("m-bob", "t-bob", "Bob Ng <bob@example.org>", "Invoice", "Please pay", "INBOX"))
	k.f.On("GET /gmail/v1/users/me/messages/m-eve", 200, metaJSON("m-eve", "t-eve", "Eve <eve@evil.example>", "Wire", "Send it", "INBOX"))
	k.f.On("POST /gmail/v1/users/me/messages/send", 200, `{"id":"s1","threadId":"t-bob","labelIds":["SENT"]}`)
	env := storetest.NewEnv(t, storetest.Options{Register: func(r *tools.Registry) error {
		mg := gmail.New(&googletest.Client{Endpoint: k.f.URL}, gmail.Options{Backoff: googletest.Backoff})
		return r.AddGroup(mg.Group, mg.Tools...)
	}})
	const signed = "Thanks!\n-- \nAna Lima, ana@example.com"
	in := chat.Inbound{ChatKey: "telegram:1", UserKey: "telegram:1", Text: "answer Bob", ID: "ev1"}
	env.Model.Call("load_tool_group", `{"group_name":"google_gmail"}`)
	env.Model.Call("gmail_reply", `{"message_id":"m-bob","body":"`+strings.ReplaceAll(signed, "\n", `\n`)+`"}`)
	env.Model.Text("Replied.")
	r, err := env.Engine.Handle(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Asks) != 1 || r.Asks[0].Always != "gmail_reply to addresses at example.org" {
		t.Fatalf("question = %+v", r)
	}
	if got, err := env.Engine.Always(context.Background(), chat.Inbound{ChatKey: "telegram:1", UserKey: "telegram:1", ID: "ev2"}, r.Ask); err != nil || got.Text != "Replied." {
		t.Fatalf("always = %+v, %v", got, err)
	}
	if n := k.f.Count("POST /gmail/v1/users/me/messages/send"); n != 1 {
		t.Fatalf("%d sends after the approval", n)
	}

	env.Model.Call("gmail_reply", `{"message_id":"m-eve","body":"`+strings.ReplaceAll(signed, "\n", `\n`)+`"}`)
	in.Text, in.ID = "answer Eve", "ev3"
	r, err = env.Engine.Handle(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	if r.Ask == "" || k.f.Count("POST /gmail/v1/users/me/messages/send") != 1 {
		t.Fatalf("a reply to evil.example ran under the rule for example.org: %+v", r)
	}
	if len(r.Asks) != 1 || r.Asks[0].Always != "gmail_reply to addresses at evil.example" {
		t.Fatalf("question = %+v", r)
	}
}
