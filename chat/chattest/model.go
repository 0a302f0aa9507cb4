// Package chattest provides a scripted OpenAI-compatible model server, a
// log buffer and a wait helper, for tests of the engine and of every
// channel. An engine on a real store is storetest.NewEnv.
package chattest

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goopenai "github.com/sashabaranov/go-openai"

	"loadout/chat"
	"loadout/chat/openai"
)

// Step is one scripted answer of the model server.
type Step struct {
	// Text is the assistant's text.
	Text string
	// Calls are tool calls; IDs are filled in when empty.
	Calls []chat.ToolCall
	// Status, when non-zero, answers with this HTTP status and Body.
	Status int
	Body   string
	// Header is added to the answer (a Retry-After, say).
	Header http.Header
	// Delay waits before answering.
	Delay time.Duration
	// Usage is reported in the response; zero means 10 prompt, 5 completion.
	Usage chat.Usage
	// NoUsage reports no usage (zeros), as some providers do.
	NoUsage bool
	// Chunks, for a streamed request, are the pieces the text arrives in;
	// by default a piece a word. ChunkDelay waits before each piece
	// after the first.
	Chunks     []string
	ChunkDelay time.Duration
	// Cut ends the answer early, as a dropped connection does: a streamed
	// one after its text and tool calls, with no finish reason and no
	// [DONE]; a plain one halfway through its JSON.
	Cut bool
}

// ModelServer is a fake chat completions server. Tests queue steps and read
// back every request the real go-openai client sent. When the queue is
// empty it answers with Fallback text. It is safe for concurrent use.
type ModelServer struct {
	URL string
	// Fallback is the text answered when no step is queued.
	Fallback string
	// Script, when set, chooses the step for a request when none is
	// queued (a soak's random faults); it must be safe for concurrent
	// use. Set it before the first request.
	Script func(req goopenai.ChatCompletionRequest) Step
	// Forget keeps no request (Requests and Bodies stay empty): a soak's
	// tens of thousands would fill the test's memory.
	Forget bool

	srv      *httptest.Server
	mu       sync.Mutex
	queue    []Step
	requests []goopenai.ChatCompletionRequest
	bodies   [][]byte
	n        int
	// firsts are when each streamed answer's first piece was written.
	firsts []time.Time
	conns  atomic.Int32
}

// Conns returns how many connections clients have opened to the server.
func (s *ModelServer) Conns() int { return int(s.conns.Load()) }

// FirstPieces returns when each streamed answer so far had its first
// piece written, to measure how soon a channel shows it.
func (s *ModelServer) FirstPieces() []time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Time(nil), s.firsts...)
}

// NewModelServer starts a server on 127.0.0.1, closed when the test ends.
func NewModelServer(t testing.TB) *ModelServer {
	s := &ModelServer{Fallback: "done"}
	s.srv = httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	s.srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.conns.Add(1)
		}
	}
	s.srv.Start()
	s.URL = s.srv.URL + "/v1"
	t.Cleanup(s.srv.Close)
	return s
}

// Push queues steps.
func (s *ModelServer) Push(steps ...Step) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queue = append(s.queue, steps...)
}

// Text queues a text answer.
func (s *ModelServer) Text(text string) { s.Push(Step{Text: text}) }

// Call queues one answer made of tool calls, each given as name and JSON
// arguments: Call("load_tool_group", `{"group_name":"config"}`, …).
func (s *ModelServer) Call(nameArgs ...string) {
	if len(nameArgs)%2 != 0 {
		panic("chattest: Call takes name, arguments pairs")
	}
	var st Step
	for i := 0; i < len(nameArgs); i += 2 {
		st.Calls = append(st.Calls, chat.ToolCall{Name: nameArgs[i], Arguments: nameArgs[i+1]})
	}
	s.Push(st)
}

// Fail queues an HTTP error answer.
func (s *ModelServer) Fail(status int) {
	s.Push(Step{Status: status, Body: fmt.Sprintf(`{"error":{"message":"fake failure %d","type":"server_error"}}`, status)})
}

// Garbled queues an answer that is not valid JSON.
func (s *ModelServer) Garbled() { s.Push(Step{Status: http.StatusOK, Body: `{"choices": [tru`}) }

// Requests returns every request received so far.
func (s *ModelServer) Requests() []goopenai.ChatCompletionRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]goopenai.ChatCompletionRequest(nil), s.requests...)
}

// Last returns the latest request; it fails the test if there is none.
func (s *ModelServer) Last(t testing.TB) goopenai.ChatCompletionRequest {
	t.Helper()
	r := s.Requests()
	if len(r) == 0 {
		t.Fatal("chattest: the model received no request")
	}
	return r[len(r)-1]
}

// Client returns the real adapter pointed at the server, with short
// backoff so retries stay fast.
func (s *ModelServer) Client() *openai.Client {
	return openai.New(openai.Config{
		BaseURL: s.URL, APIKey: "test-key", Backoff: time.Millisecond, Attempts: 3, Timeout: 5 * time.Second,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
}

func (s *ModelServer) serve(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v1/chat/completions" || r.Method != http.MethodPost {
		http.Error(w, `{"error":{"message":"not found"}}`, http.StatusNotFound)
		return
	}
	body, err := io.ReadAll(r.Body)
	var req goopenai.ChatCompletionRequest
	if err == nil {
		err = json.Unmarshal(body, &req)
	}
	if err != nil {
		http.Error(w, `{"error":{"message":"bad request"}}`, http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	if !s.Forget {
		s.requests = append(s.requests, req)
		s.bodies = append(s.bodies, body)
	}
	st := Step{Text: s.Fallback}
	script := s.Script
	if len(s.queue) > 0 {
		st = s.queue[0]
		s.queue = s.queue[1:]
		script = nil
	}
	s.n++
	n := s.n
	s.mu.Unlock()
	if script != nil {
		st = script(req)
	}

	if st.Delay > 0 {
		select {
		case <-time.After(st.Delay):
		case <-r.Context().Done():
			return
		}
	}
	w.Header().Set("Content-Type", "application/json")
	for k, v := range st.Header {
		w.Header()[k] = v
	}
	if st.Status != 0 {
		w.WriteHeader(st.Status)
		fmt.Fprint(w, st.Body)
		return
	}
	msg := goopenai.ChatCompletionMessage{Role: "assistant", Content: st.Text}
	for i, c := range st.Calls {
		id := c.ID
		if id == "" {
			id = fmt.Sprintf("call_%d_%d", n, i)
		}
		msg.ToolCalls = append(msg.ToolCalls, goopenai.ToolCall{
			ID: id, Type: goopenai.ToolTypeFunction,
			Function: goopenai.FunctionCall{Name: c.Name, Arguments: c.Arguments},
		})
	}
	usage := st.Usage
	if usage == (chat.Usage{}) {
		usage = chat.Usage{PromptTokens: 10, CompletionTokens: 5}
	}
	if st.NoUsage {
		usage = chat.Usage{}
	}
	finish := goopenai.FinishReasonStop
	if len(msg.ToolCalls) > 0 {
		finish = goopenai.FinishReasonToolCalls
	}
	if req.Stream {
		s.stream(w, r, n, req, st, msg, usage, finish)
		return
	}
	if st.Cut {
		b, _ := json.Marshal(goopenai.ChatCompletionResponse{ID: "cut", Choices: []goopenai.ChatCompletionChoice{{Message: msg}}})
		w.Write(b[:len(b)/2])
		return
	}
	json.NewEncoder(w).Encode(goopenai.ChatCompletionResponse{
		ID: fmt.Sprintf("chatcmpl-%d", n), Object: "chat.completion", Model: req.Model,
		Choices: []goopenai.ChatCompletionChoice{{Index: 0, Message: msg, FinishReason: finish}},
		Usage: goopenai.Usage{PromptTokens: usage.PromptTokens, CompletionTokens: usage.CompletionTokens,
			PromptTokensDetails: &goopenai.PromptTokensDetails{CachedTokens: usage.CachedTokens},
			TotalTokens:         usage.PromptTokens + usage.CompletionTokens},
	})
}

// Bodies returns every request body as the client sent it, byte for byte.
func (s *ModelServer) Bodies() [][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([][]byte(nil), s.bodies...)
}

// ToolNames returns the names of the tools a request carried.
func ToolNames(req goopenai.ChatCompletionRequest) []string {
	out := make([]string, len(req.Tools))
	for i, t := range req.Tools {
		out[i] = t.Function.Name
	}
	return out
}

// System returns a request's system prompt.
func System(req goopenai.ChatCompletionRequest) string {
	if len(req.Messages) > 0 && req.Messages[0].Role == "system" {
		return req.Messages[0].Content
	}
	return ""
}

// stream answers a streamed request as server-sent events: the text in
// st's chunks, then each tool call in two pieces, the finish reason, the
// usage when asked for, and [DONE].
func (s *ModelServer) stream(w http.ResponseWriter, r *http.Request, n int, req goopenai.ChatCompletionRequest, st Step,
	msg goopenai.ChatCompletionMessage, usage chat.Usage, finish goopenai.FinishReason) {
	w.Header().Set("Content-Type", "text/event-stream")
	flusher, _ := w.(http.Flusher)
	send := func(c goopenai.ChatCompletionStreamResponse) {
		c.ID, c.Object, c.Model = fmt.Sprintf("chatcmpl-%d", n), "chat.completion.chunk", req.Model
		b, _ := json.Marshal(c)
		fmt.Fprintf(w, "data: %s\n\n", b)
		if flusher != nil {
			flusher.Flush()
		}
	}
	delta := func(d goopenai.ChatCompletionStreamChoiceDelta) {
		send(goopenai.ChatCompletionStreamResponse{Choices: []goopenai.ChatCompletionStreamChoice{{Delta: d}}})
	}
	chunks := st.Chunks
	if chunks == nil && st.Text != "" {
		chunks = strings.SplitAfter(st.Text, " ")
	}
	for i, c := range chunks {
		if i > 0 && st.ChunkDelay > 0 {
			select {
			case <-time.After(st.ChunkDelay):
			case <-r.Context().Done():
				return
			}
		}
		delta(goopenai.ChatCompletionStreamChoiceDelta{Role: "assistant", Content: c})
		if i == 0 {
			s.mu.Lock()
			s.firsts = append(s.firsts, time.Now())
			s.mu.Unlock()
		}
	}
	for i, tc := range msg.ToolCalls {
		idx := i
		half := len(tc.Function.Arguments) / 2
		delta(goopenai.ChatCompletionStreamChoiceDelta{ToolCalls: []goopenai.ToolCall{{Index: &idx, ID: tc.ID, Type: tc.Type,
			Function: goopenai.FunctionCall{Name: tc.Function.Name, Arguments: tc.Function.Arguments[:half]}}}})
		delta(goopenai.ChatCompletionStreamChoiceDelta{ToolCalls: []goopenai.ToolCall{{Index: &idx,
			Function: goopenai.FunctionCall{Arguments: tc.Function.Arguments[half:]}}}})
	}
	if st.Cut {
		return
	}
	send(goopenai.ChatCompletionStreamResponse{Choices: []goopenai.ChatCompletionStreamChoice{{FinishReason: finish}}})
	if req.StreamOptions != nil && req.StreamOptions.IncludeUsage {
		send(goopenai.ChatCompletionStreamResponse{Choices: []goopenai.ChatCompletionStreamChoice{},
			Usage: &goopenai.Usage{PromptTokens: usage.PromptTokens, CompletionTokens: usage.CompletionTokens,
				PromptTokensDetails: &goopenai.PromptTokensDetails{CachedTokens: usage.CachedTokens},
				TotalTokens:         usage.PromptTokens + usage.CompletionTokens}})
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
}

// UnreachableURL returns a model server URL where nothing listens: a
// port that was just taken and given back, so connecting is refused.
func UnreachableURL(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "http://" + addr + "/v1"
}

// NewEchoServer is a model for a process a kill test starts again and
// again: it answers "re: " and the request's last message after 20 to
// 120 ms, and keeps no request.
func NewEchoServer(t testing.TB) *ModelServer {
	s := NewModelServer(t)
	s.Forget = true
	s.Script = func(req goopenai.ChatCompletionRequest) Step {
		return Step{Text: "re: " + req.Messages[len(req.Messages)-1].Content, Delay: time.Duration(20+rand.IntN(100)) * time.Millisecond}
	}
	return s
}
