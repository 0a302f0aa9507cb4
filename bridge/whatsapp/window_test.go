package whatsapp

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"loadout/bridge"
	"loadout/bridge/whatsapp/whatsapptest"
	"loadout/chat/chattest"
	"loadout/store/storetest"
	"loadout/voice"
	"loadout/voice/voicetest"
)

// Outside the 24-hour window nothing but a template may be sent. A
// notice for a person who last wrote 25 hours ago is not sent as free
// text: it is logged and held, the operator's template invites them
// back once, and when they write again they first get what was held,
// then their answer. The window is the store's, so a second process on
// the same database, which never saw the person's message, agrees.
func TestClosedWindowHoldsAnswersUntilThePersonWrites(t *testing.T) {
	r := newRig(t, storetest.Options{}, func(c *Config) { c.ReengageTemplate = "loadout_back:en_GB" })
	r.env.Model.Text("Hi.")
	r.wa.Send(t, whatsapptest.Message{From: ana, Text: "hello"})
	r.texts(ana, 1)

	// Another process on the same database.
	env2 := storetest.NewEnv(t, storetest.Options{DBPath: r.env.DBPath, Model: r.env.Model})
	b := New(r.config(func(c *Config) { c.ReengageTemplate = "loadout_back:en_GB" }), bridge.NewRouter(env2.Engine, "loadout"), env2.Store)
	run(t, r.wa, b)
	var hub bridge.Hub
	hub.Add(b, nil)
	ctx := context.Background()
	if err := hub.Notify(ctx, chatKey(ana), "From the other process."); err != nil {
		t.Fatal(err)
	}
	if got := r.texts(ana, 2); got[1] != "From the other process." {
		t.Fatalf("sent %q", got)
	}

	r.ahead.Store(int64(25 * time.Hour))
	for _, text := range []string{"Your summary: **3** meetings.", "Reminder: call Bea."} {
		if err := hub.Notify(ctx, chatKey(ana), text); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(100 * time.Millisecond)
	if got := r.wa.Texts(ana); len(got) != 2 {
		t.Fatalf("free text went out with the window closed: %q", got)
	}
	var templates []whatsapptest.Sent
	for _, s := range r.wa.Sent(ana) {
		if s.Type == "template" {
			templates = append(templates, s)
		}
	}
	if len(templates) != 1 || templates[0].Template != "loadout_back" || templates[0].Language != "en_GB" {
		t.Fatalf("templates sent: %+v", templates)
	}
	if !strings.Contains(r.logs.String(), "24-hour window is closed") {
		t.Fatal("the held message was not logged")
	}

	r.env.Model.Text("Welcome back.")
	r.wa.Send(t, whatsapptest.Message{From: ana, Text: "I'm back", At: time.Now().Add(25 * time.Hour)})
	got := r.texts(ana, 4)
	if !strings.HasPrefix(got[2], "While WhatsApp's 24-hour window was closed") || !strings.Contains(got[2], "2 messages") ||
		!strings.Contains(got[2], "Your summary: *3* meetings.") || !strings.Contains(got[2], "Reminder: call Bea.") || got[3] != "Welcome back." {
		t.Fatalf("after writing again, sent %q", got)
	}
	if n := len(r.env.Model.Requests()); n != 2 {
		t.Fatalf("the model was asked %d times", n)
	}
	// Given once: the next notice goes out as it is.
	if err := hub.Notify(ctx, chatKey(ana), "Done."); err != nil {
		t.Fatal(err)
	}
	if got := r.texts(ana, 5); got[4] != "Done." || strings.Count(strings.Join(got, "\n"), "Reminder: call Bea.") != 1 {
		t.Fatalf("sent %q", got)
	}
}

// When WhatsApp refuses a message for the window after taking it (a
// failed status, code 131047, as Meta reports it), the part is held and
// given when the person writes again.
func TestWindowRefusalReportedLaterIsHeld(t *testing.T) {
	r := newRig(t, storetest.Options{}, nil)
	r.wa.EnforceWindow()
	// The channel's clock is two hours behind WhatsApp's: it thinks the
	// window still open when it is not.
	r.ahead.Store(int64(-2 * time.Hour))
	r.env.Model.Text("A late answer.")
	r.wa.Send(t, whatsapptest.Message{From: ana, Text: "an old question", At: time.Now().Add(-25 * time.Hour)})
	chattest.Eventually(t, "the refusal to be held", func() bool {
		h, _ := r.a.held(context.Background(), ana)
		return slices.Equal(h.Parts, []string{"A late answer."})
	})
	if got := r.wa.Texts(ana); len(got) != 0 {
		t.Fatalf("delivered %q", got)
	}
	r.env.Model.Text("Hello again.")
	r.wa.Send(t, whatsapptest.Message{From: ana, Text: "hi"})
	got := r.texts(ana, 2)
	if !strings.Contains(got[0], "A late answer.") || got[1] != "Hello again." {
		t.Fatalf("sent %q", got)
	}
}

// Statuses are recorded on the chat's record of sent parts (a late
// "delivered" does not undo "read"). A part reported failed is sent
// once more; failing again, it is logged and held with a sentence
// saying so; the same failure reported twice is acted on once.
func TestStatusesAreRecordedAndFailuresRetriedThenReported(t *testing.T) {
	r := newRig(t, storetest.Options{}, nil)
	r.wa.ReportStatuses()
	r.env.Model.Text("First answer.")
	r.wa.Send(t, whatsapptest.Message{From: ana, Text: "one"})
	r.texts(ana, 1)
	first := r.wa.Sent(ana)[0].ID
	chattest.Eventually(t, "the read status recorded", func() bool {
		s := r.a.sent(context.Background(), ana)
		return len(s) == 1 && s[0].ID == first && s[0].Status == "read"
	})
	r.wa.Report(t, whatsapptest.Status{ID: first, Status: "delivered", To: ana})
	if s := r.a.sent(context.Background(), ana); s[0].Status != "read" {
		t.Fatalf("a late delivered made it %q", s[0].Status)
	}

	fail := whatsapptest.Status{ID: first, Status: "failed", To: ana, Code: 131026, Title: "Message undeliverable"}
	r.wa.Report(t, fail)
	got := r.texts(ana, 2)
	if got[1] != "First answer." {
		t.Fatalf("sent %q", got)
	}
	again := r.wa.Sent(ana)[1].ID
	r.wa.Report(t, fail) // the same news again
	fail.ID = again
	r.wa.Report(t, fail)
	time.Sleep(100 * time.Millisecond)
	if got := r.wa.Texts(ana); len(got) != 2 {
		t.Fatalf("sent %q", got)
	}
	if !strings.Contains(r.logs.String(), "could not deliver a message sent twice") {
		t.Fatal("the second failure was not logged")
	}
	r.env.Model.Text("Second answer.")
	r.wa.Send(t, whatsapptest.Message{From: ana, Text: "two"})
	got = r.texts(ana, 4)
	if !strings.Contains(got[2], "WhatsApp could not deliver this message earlier.") || !strings.Contains(got[2], "First answer.") || got[3] != "Second answer." {
		t.Fatalf("sent %q", got)
	}
}

const heard = "Remind me to call the dentist tomorrow at nine."

// A voice note is downloaded through its media id, transcribed once,
// answered from its transcript, and the answer sent as audio too (an
// upload, then an audio message); delivered again, nothing is heard
// again.
func TestVoiceNoteIsHeardAndAnsweredAloud(t *testing.T) {
	ws := workspace(t)
	audio := voicetest.New(t, heard)
	cfg := voice.Config{TranscriptionModel: "whisper-1", BaseURL: audio.URL, APIKey: audio.Key, Reply: voice.ReplyWhenSpoken}
	svc := voice.New(cfg.WithDefaults("", ""), voice.Options{Workspace: ws, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Sleep: func(ctx context.Context, _ time.Duration) error { return ctx.Err() }})
	r := newRig(t, storetest.Options{}, func(c *Config) { c.Files, c.Voice = ws, svc })
	r.env.Model.Text("I'll remind you.")
	r.env.Model.Text("second")
	id := r.wa.Send(t, whatsapptest.Message{From: ana, File: &whatsapptest.Media{Kind: "audio", MimeType: "audio/ogg; codecs=opus", Voice: true,
		Content: voicetest.Note(t)}})
	r.wa.WaitFor(t, "the spoken answer", func() bool { return len(r.wa.Sent(ana)) == 2 })
	if got := r.lastAsked(); !strings.HasPrefix(got, "(voice message) "+heard) {
		t.Fatalf("the model read %q", got)
	}
	sent := r.wa.Sent(ana)
	if sent[0].Text != "I'll remind you." || sent[1].Type != "audio" || sent[1].File == nil ||
		!bytes.Equal(sent[1].File.Content, audio.Audio()) || sent[1].File.MimeType != "audio/ogg" {
		t.Fatalf("sent %+v", sent)
	}
	r.wa.Redeliver(t, id)
	r.wa.Send(t, whatsapptest.Message{From: ana, Text: "next"})
	r.texts(ana, 2)
	if n := len(audio.Transcriptions()); n != 1 {
		t.Fatalf("%d transcriptions", n)
	}
}

// Without voice set up, the person is told once.
func TestVoiceNoteWithoutVoice(t *testing.T) {
	r := newRig(t, storetest.Options{}, nil)
	r.wa.Send(t, whatsapptest.Message{From: ana, File: &whatsapptest.Media{Kind: "audio", MimeType: "audio/ogg", Voice: true, Content: []byte("OggS")}})
	if got := r.texts(ana, 1); got[0] != bridge.TextVoiceOff {
		t.Fatalf("told %q", got)
	}
}

// A question outside the window is held with the commands that answer
// it: buttons cannot go out, the request's code can.
func TestQuestionOutsideTheWindowIsHeldWithItsCommands(t *testing.T) {
	r := newRig(t, storetest.Options{}, nil)
	old := route{To: bea, At: time.Now().Add(-30 * time.Hour).Unix()}
	if err := r.a.Ask(context.Background(), old, "Delete the archive?", bridge.Question{ID: "k7f2abcdef"}, "whatsapp:"+bea); err != nil {
		t.Fatal(err)
	}
	if n := len(r.wa.Sent(bea)); n != 0 {
		t.Fatalf("%d messages sent outside the window", n)
	}
	h, err := r.a.held(context.Background(), bea)
	if err != nil || len(h.Parts) != 1 || !strings.Contains(h.Parts[0], "Delete the archive?") || !strings.Contains(h.Parts[0], "/approve #k7f2") {
		t.Fatalf("held %+v (%v)", h, err)
	}
}

// held is what the chat with to holds and nobody took yet, as the
// test's store (store.DB) says.
func (a *Adapter) held(ctx context.Context, to string) (held, error) {
	st := a.store.(interface {
		HeldMessages(ctx context.Context, chat string) ([]string, int, error)
	})
	parts, dropped, err := st.HeldMessages(ctx, chatKey(to))
	return held{Parts: parts, Dropped: dropped}, err
}
