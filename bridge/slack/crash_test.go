package slack

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"loadout/bridge"
	"loadout/bridge/slack/slacktest"
	"loadout/chat/chattest"
	"loadout/store/storetest"
)

// A rig runs the Slack channel as a process that can be stopped hard and
// started again on the same database, fake Slack and model, as a crash
// and a restart would.
type rig struct {
	t     *testing.T
	mode  string
	fake  *slacktest.Server
	model *chattest.ModelServer
	db    string
	chunk int
	logs  *chattest.LogBuffer
	// bodies are the Events API callbacks sent, by event id, for retries.
	bodies    map[string][]byte
	envelopes int
}

// proc is one run of the channel.
type proc struct {
	env     *storetest.Env
	adapter *Adapter
	// url is the Events API server's base URL, in ModeEvents.
	url string
	// loseAnswer makes the Events API server handle the next request
	// and then drop the connection, so Slack never sees the answer; the
	// status the handler meant to send goes to lost.
	loseAnswer atomic.Bool
	lost       chan int
	stop       func()
}

func newRig(t *testing.T, mode string, chunk int) *rig {
	return &rig{
		t: t, mode: mode, fake: slacktest.NewServer(t), model: chattest.NewModelServer(t),
		db: filepath.Join(t.TempDir(), "loadout.db"), chunk: chunk, logs: &chattest.LogBuffer{}, bodies: map[string][]byte{},
	}
}

// boot starts a process and waits until it takes events. Its shutdown
// grace is a nanosecond: stopping it cuts whatever is in flight at once,
// as a crash does.
func (r *rig) boot() *proc {
	t := r.t
	t.Helper()
	env := storetest.NewEnv(t, storetest.Options{DBPath: r.db, Model: r.model})
	p := &proc{env: env, lost: make(chan int, 1)}
	p.adapter = New(Config{
		BotToken: "xoxb-test", AppToken: "xapp-test", SigningSecret: secret, Mode: r.mode,
		APIURL: r.fake.APIURL, AllowedUsers: []string{owner},
		Backoff: time.Millisecond, ChunkSize: r.chunk, SendPerChannelSecond: -1,
		Delivery: bridge.Delivery{ShutdownGrace: time.Nanosecond,
			Logger: slog.New(slog.NewTextHandler(r.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))},
	}, bridge.NewRouter(env.Engine, "loadout"), env.Store)
	conns := r.fake.Connections()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.adapter.Run(ctx) }()
	var srv *httptest.Server
	if r.mode == ModeEvents {
		events := p.adapter.EventsHandler()
		mux := http.NewServeMux()
		mux.Handle("POST /slack/events", http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			if !p.loseAnswer.CompareAndSwap(true, false) {
				events.ServeHTTP(w, req)
				return
			}
			rec := httptest.NewRecorder()
			events.ServeHTTP(rec, req)
			p.lost <- rec.Code
			panic(http.ErrAbortHandler) // the connection drops before the answer
		}))
		srv = httptest.NewServer(mux)
		p.url = srv.URL
	}
	var once sync.Once
	p.stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Run returned %v, want nil", err)
				}
			case <-time.After(slacktest.Wait):
				t.Fatal("Run did not return after cancel")
			}
			if srv != nil {
				srv.Close()
			}
		})
	}
	t.Cleanup(p.stop)
	if r.mode == ModeSocket {
		r.fake.WaitFor(t, "a new socket mode connection", func() bool { return r.fake.Connections() > conns })
	} else {
		chattest.Eventually(t, "the adapter to know its workspace", p.adapter.identified)
	}
	return p
}

// deliver sends an event as Slack does and waits until Slack has its
// acknowledgement.
func (r *rig) deliver(p *proc, eventID string, e slacktest.Event) {
	r.t.Helper()
	payload := slacktest.Callback(eventID, e)
	if r.mode == ModeSocket {
		r.envelopes++
		id := "env-" + strconv.Itoa(r.envelopes)
		r.fake.Send(r.t, id, "events_api", payload, 0)
		r.fake.WaitAck(r.t, id)
		return
	}
	r.bodies[eventID] = mustJSON(r.t, payload)
	if code, err := r.post(p, r.bodies[eventID], 0); err != nil || code != http.StatusOK {
		r.t.Fatalf("event %s: status %d, %v", eventID, code, err)
	}
}

// post sends a signed Events API request; retry > 0 marks it as Slack's
// retry number retry.
func (r *rig) post(p *proc, body []byte, retry int) (int, error) {
	req, err := http.NewRequest(http.MethodPost, p.url+"/slack/events", bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header = slacktest.Sign(secret, time.Now(), body)
	req.Header.Set("Content-Type", "application/json")
	if retry > 0 {
		req.Header.Set("X-Slack-Retry-Num", strconv.Itoa(retry))
		req.Header.Set("X-Slack-Retry-Reason", "http_timeout")
	}
	resp, err := (&http.Client{Timeout: slacktest.Wait}).Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// followUp sends one more message in D1 and waits for its answer. The
// chat's events run in order, so once it is answered, anything sent
// twice for an earlier event would already have been posted.
func (r *rig) followUp(p *proc, posts int) []slacktest.Call {
	r.t.Helper()
	r.model.Text("follow-up answer")
	r.deliver(p, "EvNext", slacktest.DM("D1", owner, "and another thing", "20.1"))
	got := r.fake.WaitCalls(r.t, "chat.postMessage", posts+1)
	if last := got[len(got)-1].Params["text"]; last != "follow-up answer" {
		r.t.Fatalf("last post %q, want the follow-up's answer", last)
	}
	chattest.Eventually(r.t, "every event done", func() bool { return unfinished(p.env) == 0 })
	return got
}

func itemState(env *storetest.Env, eventID string) string {
	var s string
	env.Store.Gorm().Raw("SELECT state FROM inbox_items WHERE channel = 'slack' AND event_id = ?", "event:"+eventID).Scan(&s)
	return s
}

func unfinished(env *storetest.Env) int {
	var n int
	env.Store.Gorm().Raw("SELECT COUNT(*) FROM inbox_items WHERE channel = 'slack' AND state IN ('pending', 'answered')").Scan(&n)
	return n
}

func userMessages(env *storetest.Env, text string) int {
	var n int
	env.Store.Gorm().Raw("SELECT COUNT(*) FROM messages WHERE role = 'user' AND text = ?", text).Scan(&n)
	return n
}

func texts(calls []slacktest.Call) []string {
	out := make([]string, len(calls))
	for i, c := range calls {
		out[i] = c.Params["text"]
	}
	return out
}

// longAnswer is an answer that splits into at least three parts at
// chunk characters, each starting "Part i begins".
func longAnswer(t *testing.T, chunk int) (string, []string) {
	var b strings.Builder
	for i := 0; i < 3; i++ {
		fmt.Fprintf(&b, "Part %d begins. %s\n\n", i, strings.Repeat("word ", chunk/6))
	}
	parts := bridge.Split(b.String(), chunk)
	if len(parts) < 3 {
		t.Fatalf("the answer splits into %d parts; make it longer", len(parts))
	}
	return b.String(), parts
}

func bothModes(t *testing.T, test func(t *testing.T, mode string)) {
	for _, mode := range []string{ModeSocket, ModeEvents} {
		t.Run(mode, func(t *testing.T) { test(t, mode) })
	}
}

// Stopped after the event is stored but before Slack learns it arrived:
// over Socket Mode the ack is lost, over HTTP the answer to Slack's
// request is. Slack delivers the event again after the restart; it is
// answered once.
func TestCrashAfterStoreBeforeAck(t *testing.T) {
	bothModes(t, func(t *testing.T, mode string) {
		r := newRig(t, mode, 0)
		p := r.boot()
		r.fake.Hold("reactions.add", 0) // the turn begins only after the crash
		const text = "are you there?"
		payload := slacktest.Callback("EvA", slacktest.DM("D1", owner, text, "10.1"))
		if mode == ModeSocket {
			r.fake.LoseAcks(1)
			r.fake.Send(t, "env-a", "events_api", payload, 0)
			r.fake.WaitAckLost(t, "env-a")
		} else {
			r.bodies["EvA"] = mustJSON(t, payload)
			p.loseAnswer.Store(true)
			if _, err := r.post(p, r.bodies["EvA"], 0); err == nil {
				t.Fatal("Slack got an answer to the request, want it lost")
			}
			if code := <-p.lost; code != http.StatusOK {
				t.Fatalf("the handler answered %d, want 200 (stored)", code)
			}
		}
		r.fake.WaitFor(t, "the turn to begin", func() bool { return r.fake.Waiting("reactions.add") == 1 })
		p.stop()
		r.fake.WaitFor(t, "the held call to be abandoned", func() bool { return r.fake.Waiting("reactions.add") == 0 })
		r.fake.Release("reactions.add")
		if s := itemState(p.env, "EvA"); s != "pending" {
			t.Fatalf("inbox state %q after the crash, want pending", s)
		}

		r.model.Text("yes, here")
		p2 := r.boot()
		if mode == ModeSocket {
			if ids := r.fake.Redeliver(t); len(ids) != 1 || ids[0] != "env-a" {
				t.Fatalf("Slack redelivered %v, want the unacknowledged env-a", ids)
			}
			r.fake.WaitAck(t, "env-a")
		} else if code, err := r.post(p2, r.bodies["EvA"], 1); err != nil || code != http.StatusOK {
			t.Fatalf("Slack's retry: status %d, %v", code, err)
		}
		posts := texts(r.followUp(p2, 1))
		if len(posts) != 2 || posts[0] != "yes, here" {
			t.Fatalf("posts %q, want the answer once, then the follow-up's", posts)
		}
		if n := userMessages(p2.env, text); n != 1 {
			t.Errorf("the message is in the history %d times, want 1", n)
		}
		if n := len(r.model.Requests()); n != 2 {
			t.Errorf("model called %d times, want 2", n)
		}
		if got := r.fake.Reactions("D1", "10.1"); len(got) != 0 {
			t.Errorf("reactions left on the message: %v", got)
		}
	})
}

// Stopped after Slack has its ack, while the model works on the answer:
// Slack does not deliver the event again, so the restart must answer it
// from the inbox, carrying on from the message already recorded.
func TestCrashAfterAckBeforeModelAnswers(t *testing.T) {
	bothModes(t, func(t *testing.T, mode string) {
		r := newRig(t, mode, 0)
		p := r.boot()
		const text = "what time is it?"
		r.model.Push(chattest.Step{Text: "never sent", Delay: time.Minute})
		r.deliver(p, "EvA", slacktest.DM("D1", owner, text, "10.1"))
		chattest.Eventually(t, "the model to be asked", func() bool { return len(r.model.Requests()) == 1 })
		// A crash leaves the working reaction on the message.
		r.fake.Fail("reactions.remove", slacktest.Failure{Error: "invalid_auth"})
		p.stop()
		if s := itemState(p.env, "EvA"); s != "pending" {
			t.Fatalf("inbox state %q after the crash, want pending", s)
		}
		if got := r.fake.Reactions("D1", "10.1"); len(got) != 1 {
			t.Fatalf("reactions %v before the restart, want the working one", got)
		}

		r.model.Text("it is noon")
		p2 := r.boot()
		posts := texts(r.followUp(p2, 1))
		if len(posts) != 2 || posts[0] != "it is noon" {
			t.Fatalf("posts %q, want the answer once, then the follow-up's", posts)
		}
		if n := userMessages(p2.env, text); n != 1 {
			t.Errorf("the message is in the history %d times, want 1", n)
		}
		reqs := r.model.Requests()
		if len(reqs) != 3 {
			t.Fatalf("model called %d times, want 3 (cut, resumed, follow-up)", len(reqs))
		}
		n := 0
		for _, m := range reqs[1].Messages {
			if m.Content == text {
				n++
			}
		}
		if n != 1 {
			t.Errorf("the resumed request carries the message %d times, want 1", n)
		}
		if got := r.fake.Reactions("D1", "10.1"); len(got) != 0 {
			t.Errorf("reactions left on the message after it was answered: %v", got)
		}
	})
}

// Stopped after the answer is stored, while it is being posted: the
// restart posts it without asking the model again.
func TestCrashAfterAnswerStoredBeforeSent(t *testing.T) {
	bothModes(t, func(t *testing.T, mode string) {
		r := newRig(t, mode, 0)
		stopWhilePosting(t, r)
		if n := len(r.fake.Abandoned("chat.postMessage")); n != 1 {
			t.Fatalf("%d posts abandoned, want 1", n)
		}

		p2 := r.boot()
		posts := texts(r.followUp(p2, 1))
		if len(posts) != 2 || posts[0] != "the answer" {
			t.Fatalf("posts %q, want the answer once, then the follow-up's", posts)
		}
		if n := len(r.model.Requests()); n != 2 {
			t.Errorf("model called %d times, want 2: a stored answer is not asked for again", n)
		}
		if n := userMessages(p2.env, "question"); n != 1 {
			t.Errorf("the message is in the history %d times, want 1", n)
		}
		// The shutdown cut the post, not the turn's end: the working
		// reaction came off.
		if got := r.fake.Reactions("D1", "10.1"); len(got) != 0 {
			t.Errorf("reactions left on the message: %v", got)
		}
	})
}

// stopWhilePosting runs a turn whose answer is stored, holds its post,
// and stops the process hard while the post is in flight.
func stopWhilePosting(t *testing.T, r *rig) {
	t.Helper()
	p := r.boot()
	r.fake.Hold("chat.postMessage", 0)
	r.model.Text("the answer")
	r.deliver(p, "EvA", slacktest.DM("D1", owner, "question", "10.1"))
	r.fake.WaitFor(t, "the answer to be held", func() bool { return r.fake.Waiting("chat.postMessage") == 1 })
	if s := itemState(p.env, "EvA"); s != "answered" {
		t.Fatalf("inbox state %q while posting, want answered", s)
	}
	p.stop()
	r.fake.WaitFor(t, "the held post to be abandoned", func() bool { return len(r.fake.Abandoned("chat.postMessage")) == 1 })
	r.fake.Release("chat.postMessage")
}

// Killed (nothing ran at exit) while a stored answer was being posted:
// the working reaction the dead process left is taken off when the
// restart sends the answer.
func TestKilledWhileSendingLeavesNoReaction(t *testing.T) {
	bothModes(t, func(t *testing.T, mode string) {
		r := newRig(t, mode, 0)
		stopWhilePosting(t, r)
		r.fake.React("D1", "10.1", WorkingReaction) // as a SIGKILL leaves it

		p2 := r.boot()
		if posts := texts(r.followUp(p2, 1)); len(posts) != 2 || posts[0] != "the answer" {
			t.Fatalf("posts %q, want the answer once, then the follow-up's", posts)
		}
		if got := r.fake.Reactions("D1", "10.1"); len(got) != 0 {
			t.Errorf("reactions left on the message: %v", got)
		}
	})
}

// Stopped between two parts of a long answer, before Slack took the
// second: the restart posts the rest in order, and nothing twice.
func TestCrashBetweenParts(t *testing.T) {
	bothModes(t, func(t *testing.T, mode string) {
		r := newRig(t, mode, 300)
		answer, parts := longAnswer(t, 300)
		p := r.boot()
		r.fake.Hold("chat.postMessage", 1)
		r.model.Text(answer)
		r.deliver(p, "EvA", slacktest.Mention("C1", owner, "<@UBOT> tell me a lot", "10.1", ""))
		r.fake.WaitFor(t, "the second part to be held", func() bool { return r.fake.Waiting("chat.postMessage") == 1 })
		p.stop()
		r.fake.WaitFor(t, "the held post to be abandoned", func() bool { return r.fake.Waiting("chat.postMessage") == 0 })
		r.fake.Release("chat.postMessage")
		if n := len(r.fake.Calls("chat.postMessage")); n != 1 {
			t.Fatalf("%d parts posted before the restart, want 1", n)
		}

		p2 := r.boot()
		r.fake.WaitCalls(t, "chat.postMessage", len(parts))
		chattest.Eventually(t, "the event done", func() bool { return itemState(p2.env, "EvA") == "done" })
		posts := r.fake.Calls("chat.postMessage")
		if len(posts) != len(parts) {
			t.Fatalf("%d posts, want the %d parts once each", len(posts), len(parts))
		}
		for i, c := range posts {
			if !strings.HasPrefix(c.Params["text"], fmt.Sprintf("Part %d begins", i)) || c.Params["thread_ts"] != "10.1" {
				t.Errorf("post %d = %.30q in thread %q, want part %d in the thread", i, c.Params["text"], c.Params["thread_ts"], i)
			}
		}
		if n := len(r.model.Requests()); n != 1 {
			t.Errorf("model called %d times, want 1", n)
		}
	})
}

// Stopped while Slack had taken the second part but its answer had not
// come back: the restart cannot know, and posts that one part again; no
// other part goes out twice.
func TestCrashWithPartInFlight(t *testing.T) {
	bothModes(t, func(t *testing.T, mode string) {
		r := newRig(t, mode, 300)
		answer, parts := longAnswer(t, 300)
		p := r.boot()
		r.fake.HoldReply("chat.postMessage", 1)
		r.model.Text(answer)
		r.deliver(p, "EvA", slacktest.DM("D1", owner, "tell me a lot", "10.1"))
		r.fake.WaitFor(t, "the second part's answer to be held", func() bool { return r.fake.Waiting("chat.postMessage") == 1 })
		p.stop()
		r.fake.WaitFor(t, "the held answer to be abandoned", func() bool { return r.fake.Waiting("chat.postMessage") == 0 })
		r.fake.Release("chat.postMessage")

		p2 := r.boot()
		posts := texts(r.followUp(p2, len(parts)+1))
		want := append([]string{parts[0], parts[1]}, parts[1:]...)
		if len(posts) != len(want)+1 {
			t.Fatalf("%d posts, want %d: the part in flight again and no other", len(posts), len(want)+1)
		}
		for i, w := range want {
			if !strings.HasPrefix(posts[i], w[:14]) {
				t.Errorf("post %d = %.30q, want %.14q", i, posts[i], w)
			}
		}
		if n := len(r.model.Requests()); n != 2 {
			t.Errorf("model called %d times, want 2", n)
		}
	})
}

// Slack delivers an event again while its first delivery is still being
// answered (over Socket Mode in the same envelope, over HTTP with
// X-Slack-Retry-Num): it is answered once.
func TestRedeliveryWhileAnswering(t *testing.T) {
	bothModes(t, func(t *testing.T, mode string) {
		r := newRig(t, mode, 0)
		p := r.boot()
		r.fake.Hold("reactions.add", 0)
		r.model.Text("only once")
		payload := slacktest.Callback("EvA", slacktest.DM("D1", owner, "hello", "10.1"))
		if mode == ModeSocket {
			r.fake.Send(t, "env-a", "events_api", payload, 0)
			r.fake.WaitAck(t, "env-a")
			r.fake.Send(t, "env-a", "events_api", payload, 1)
			r.fake.WaitFor(t, "the second ack", func() bool { return r.fake.Acks("env-a") == 2 })
		} else {
			body := mustJSON(t, payload)
			for retry := 0; retry < 3; retry++ {
				if code, err := r.post(p, body, retry); err != nil || code != http.StatusOK {
					t.Fatalf("delivery %d: status %d, %v", retry, code, err)
				}
			}
		}
		r.fake.Release("reactions.add")
		posts := texts(r.followUp(p, 1))
		if len(posts) != 2 || posts[0] != "only once" {
			t.Fatalf("posts %q, want the answer once, then the follow-up's", posts)
		}
		if n := userMessages(p.env, "hello"); n != 1 {
			t.Errorf("the message is in the history %d times, want 1", n)
		}
	})
}
