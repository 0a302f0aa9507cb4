package slacktest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"testing"

	"loadout/bridge/bridgetest"
)

// The Web API: the methods the client calls, what Slack does with them
// (posts, updates, reactions) and the response URLs of slash commands.

// Failure is a queued error answer for a method.
type Failure struct {
	Status int
	// RetryAfter is sent as the Retry-After header when not empty.
	RetryAfter string
	// Error, with Status 0, answers {"ok":false,"error":Error}.
	Error string
}

// Fail queues failures answered, in order, to the next calls of method.
func (s *Server) Fail(method string, f ...Failure) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failures[method] = append(s.failures[method], f...)
}

// Calls returns the calls of method received so far ("" for all).
func (s *Server) Calls(method string) []Call {
	s.acting.RLock()
	defer s.acting.RUnlock()
	return s.calls.Filter(func(c Call) bool { return method == "" || c.Method == method })
}

// WaitCalls waits until at least n calls of method arrived and returns
// all of them; it fails the test after Wait.
func (s *Server) WaitCalls(t testing.TB, method string, n int) []Call {
	t.Helper()
	var got []Call
	bridgetest.WaitFor(t, fmt.Sprintf("%d calls of %s", n, method), &s.calls.Signal, func() bool {
		got = s.Calls(method)
		return len(got) >= n
	})
	return got
}

// Message returns the current text of a message the bot posted (after
// its updates), and whether there is one.
func (s *Server) Message(channel, ts string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	text, ok := s.messages[channel+"/"+ts]
	return text, ok
}

// Messages returns the current texts of the bot's messages in channel,
// in the order they were posted.
func (s *Server) Messages(channel string) []string {
	s.acting.RLock()
	defer s.acting.RUnlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	var keys []string
	for key := range s.messages {
		if c, _, _ := strings.Cut(key, "/"); c == channel {
			keys = append(keys, key)
		}
	}
	sort.Strings(keys) // the ts are of one width
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = s.messages[k]
	}
	return out
}

// TSOf is the ts of the bot's message in channel whose text is text, or
// "".
func (s *Server) TSOf(channel, text string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	for key, t := range s.messages {
		if c, ts, _ := strings.Cut(key, "/"); c == channel && t == text {
			return ts
		}
	}
	return ""
}

// React puts a reaction on a message as if an earlier process had added
// it and died before taking it off.
func (s *Server) React(channel, ts, name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reactions[channel+"/"+ts+"/"+name] = true
}

// Reactions returns the names of the reactions on the message at ts in
// channel, as reactions.add and reactions.remove left them.
func (s *Server) Reactions(channel, ts string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	prefix := channel + "/" + ts + "/"
	for k := range s.reactions {
		if name, ok := strings.CutPrefix(k, prefix); ok {
			out = append(out, name)
		}
	}
	return out
}

// ResponseURL returns a response URL for a slash command.
func (s *Server) ResponseURL(id string) string { return s.URL + "/response/" + id }

func (s *Server) api(w http.ResponseWriter, r *http.Request) {
	method := strings.TrimPrefix(r.URL.Path, "/api/")
	c := Call{Method: method, Token: strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "), Params: params(r)}
	if tok, ok := c.Params["token"]; ok { // form posts carry the token as a field
		c.Token = tok
		delete(c.Params, "token")
	}
	release, held, reply := s.held(method)
	if held && !reply && !s.wait(r, method, release) {
		record(s, &s.abandoned, c)
		return
	}
	// Acted on first, then recorded: a test that saw the call sees
	// what it did (a posted message's ts).
	var out bytes.Buffer
	s.acting.Lock()
	status := s.answer(w.Header(), &out, c)
	record(s, &s.calls, c)
	s.acting.Unlock()
	if held && reply && !s.wait(r, method, release) {
		return // acted on; the answer is lost
	}
	w.WriteHeader(status)
	w.Write(out.Bytes())
}

// answer acts on one Web API call and writes its answer to out.
func (s *Server) answer(hd http.Header, out *bytes.Buffer, c Call) int {
	s.mu.Lock()
	var fail *Failure
	if q := s.failures[c.Method]; len(q) > 0 {
		fail = &q[0]
		s.failures[c.Method] = q[1:]
	}
	s.mu.Unlock()
	hd.Set("Content-Type", "application/json")
	enc := json.NewEncoder(out)
	if fail != nil {
		if fail.RetryAfter != "" {
			hd.Set("Retry-After", fail.RetryAfter)
		}
		if fail.Status != 0 {
			fmt.Fprint(out, `{"ok":false,"error":"fake failure"}`)
			return fail.Status
		}
		enc.Encode(map[string]any{"ok": false, "error": fail.Error})
		return http.StatusOK
	}
	if !strings.HasPrefix(c.Token, "xox") && !strings.HasPrefix(c.Token, "xapp-") {
		enc.Encode(map[string]any{"ok": false, "error": "not_authed"})
		return http.StatusOK
	}
	switch c.Method {
	case "auth.test":
		enc.Encode(map[string]any{"ok": true, "url": "https://test.slack.com/", "team": "Test",
			"user": "loadout", "team_id": TeamID, "user_id": BotUserID, "bot_id": BotID})
	case "apps.connections.open":
		if !strings.HasPrefix(c.Token, "xapp-") {
			enc.Encode(map[string]any{"ok": false, "error": "invalid_auth"})
			return http.StatusOK
		}
		enc.Encode(map[string]any{"ok": true, "url": "ws" + strings.TrimPrefix(s.URL, "http") + "/socket"})
	case "files.getUploadURLExternal":
		enc.Encode(s.uploadURL())
	case "files.completeUploadExternal":
		enc.Encode(s.completeUpload(c))
	case "chat.update":
		// As Slack does: the message keeps its ts; an unknown one is an
		// error.
		key := c.Params["channel"] + "/" + c.Params["ts"]
		s.mu.Lock()
		_, ok := s.messages[key]
		if ok {
			s.messages[key] = c.Params["text"]
		}
		s.mu.Unlock()
		if !ok {
			enc.Encode(map[string]any{"ok": false, "error": "message_not_found"})
			return http.StatusOK
		}
		s.changed.Notify()
		enc.Encode(map[string]any{"ok": true, "channel": c.Params["channel"], "ts": c.Params["ts"], "text": c.Params["text"]})
	case "chat.postMessage", "chat.postEphemeral":
		s.mu.Lock()
		s.ts++
		ts := fmt.Sprintf("1700000000.%06d", s.ts)
		if c.Method == "chat.postMessage" {
			s.messages[c.Params["channel"]+"/"+ts] = c.Params["text"]
		}
		s.mu.Unlock()
		enc.Encode(map[string]any{"ok": true, "channel": c.Params["channel"], "ts": ts, "message_ts": ts})
	case "reactions.add", "reactions.remove":
		// As Slack does, a reaction is on a message once.
		key := c.Params["channel"] + "/" + c.Params["timestamp"] + "/" + c.Params["name"]
		s.mu.Lock()
		on := s.reactions[key]
		if c.Method == "reactions.add" {
			s.reactions[key] = true
		} else {
			delete(s.reactions, key)
		}
		s.mu.Unlock()
		s.changed.Notify()
		switch {
		case c.Method == "reactions.add" && on:
			enc.Encode(map[string]any{"ok": false, "error": "already_reacted"})
		case c.Method == "reactions.remove" && !on:
			enc.Encode(map[string]any{"ok": false, "error": "no_reaction"})
		default:
			enc.Encode(map[string]any{"ok": true})
		}
	default:
		enc.Encode(map[string]any{"ok": true})
	}
	return http.StatusOK
}

// response takes a slash command's answer at its response URL.
func (s *Server) response(w http.ResponseWriter, r *http.Request) {
	c := Call{Method: "response_url", Params: params(r)}
	c.Params["id"] = strings.TrimPrefix(r.URL.Path, "/response/")
	record(s, &s.calls, c)
	fmt.Fprint(w, "ok")
}

// params reads a form or JSON body into strings.
func params(r *http.Request) map[string]string {
	out := map[string]string{}
	body, _ := io.ReadAll(r.Body)
	if strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
		var m map[string]any
		if json.Unmarshal(body, &m) == nil {
			for k, v := range m {
				if s, ok := v.(string); ok {
					out[k] = s
				} else {
					b, _ := json.Marshal(v)
					out[k] = string(b)
				}
			}
		}
		return out
	}
	vals, _ := url.ParseQuery(string(body))
	for k := range vals {
		out[k] = vals.Get(k)
	}
	for k := range r.URL.Query() {
		out[k] = r.URL.Query().Get(k)
	}
	return out
}
