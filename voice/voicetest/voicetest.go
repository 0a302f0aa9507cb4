// Package voicetest is a fake OpenAI-compatible audio service for tests:
// /audio/transcriptions reads the multipart request go-openai sends and
// answers a set transcript; /audio/speech answers OGG/Opus audio. It
// records every request.
package voicetest

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
)

// Transcription is one request to /audio/transcriptions.
type Transcription struct {
	Model, Language, FileName string
	Audio                     []byte
}

// Speech is one request to /audio/speech.
type Speech struct {
	Model, Input, Voice, Format string
}

// Server is the fake audio service. It is safe for concurrent use.
type Server struct {
	// URL is the base URL clients are given ("http://127.0.0.1:N/v1").
	URL string
	// Key is the API key requests must carry.
	Key string

	mu             sync.Mutex
	transcript     string
	fails          []int
	speechFails    []int
	transcriptions []Transcription
	speeches       []Speech
	audio          []byte
}

// New starts a server on 127.0.0.1, closed when the test ends. It
// answers every transcription with transcript and every speech request
// with the OGG/Opus note in this package's testdata.
func New(t testing.TB, transcript string) *Server {
	s := &Server{Key: "voice-key", transcript: transcript, audio: Note(t)}
	srv := httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(srv.Close)
	s.URL = srv.URL + "/v1"
	return s
}

// Note is a real OGG/Opus voice note (2.8 s of synthetic speech: "Remind
// me to call the dentist tomorrow at nine.").
func Note(t testing.TB) []byte {
	_, file, _, _ := runtime.Caller(0)
	b, err := os.ReadFile(filepath.Join(filepath.Dir(file), "..", "testdata", "note.ogg"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Fail answers the next transcriptions with these HTTP statuses.
func (s *Server) Fail(status ...int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fails = append(s.fails, status...)
}

// FailSpeech answers the next speech requests with these HTTP statuses.
func (s *Server) FailSpeech(status ...int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.speechFails = append(s.speechFails, status...)
}

// Transcriptions returns the transcription requests so far.
func (s *Server) Transcriptions() []Transcription {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Transcription(nil), s.transcriptions...)
}

// Speeches returns the speech requests so far.
func (s *Server) Speeches() []Speech {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Speech(nil), s.speeches...)
}

// Audio is what /audio/speech answers.
func (s *Server) Audio() []byte { return s.audio }

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Authorization") != "Bearer "+s.Key {
		writeErr(w, http.StatusUnauthorized, "Incorrect API key provided")
		return
	}
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/v1/audio/transcriptions":
		s.transcribe(w, r)
	case r.Method == http.MethodPost && r.URL.Path == "/v1/audio/speech":
		s.speak(w, r)
	default:
		writeErr(w, http.StatusNotFound, "no such endpoint: "+r.URL.Path)
	}
}

func (s *Server) transcribe(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseMultipartForm(32 << 20); err != nil {
		writeErr(w, http.StatusBadRequest, "not a multipart request: "+err.Error())
		return
	}
	fh := r.MultipartForm.File["file"]
	if len(fh) != 1 || r.FormValue("model") == "" {
		writeErr(w, http.StatusBadRequest, "file and model are required")
		return
	}
	f, err := fh[0].Open()
	if err != nil {
		writeErr(w, http.StatusBadRequest, err.Error())
		return
	}
	audio, _ := io.ReadAll(f)
	f.Close()
	s.mu.Lock()
	s.transcriptions = append(s.transcriptions, Transcription{Model: r.FormValue("model"), Language: r.FormValue("language"),
		FileName: fh[0].Filename, Audio: audio})
	var fail int
	if len(s.fails) > 0 {
		fail, s.fails = s.fails[0], s.fails[1:]
	}
	text := s.transcript
	s.mu.Unlock()
	if fail != 0 {
		writeErr(w, fail, "the transcription failed")
		return
	}
	writeJSON(w, map[string]string{"text": text})
}

func (s *Server) speak(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Model  string `json:"model"`
		Input  string `json:"input"`
		Voice  string `json:"voice"`
		Format string `json:"response_format"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Input == "" || req.Model == "" {
		writeErr(w, http.StatusBadRequest, "model and input are required")
		return
	}
	s.mu.Lock()
	s.speeches = append(s.speeches, Speech{Model: req.Model, Input: req.Input, Voice: req.Voice, Format: req.Format})
	var fail int
	if len(s.speechFails) > 0 {
		fail, s.speechFails = s.speechFails[0], s.speechFails[1:]
	}
	s.mu.Unlock()
	if fail != 0 {
		writeErr(w, fail, "the speech failed")
		return
	}
	w.Header().Set("Content-Type", "audio/ogg")
	w.Write(s.audio)
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

func writeErr(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"message": msg, "type": "invalid_request_error"}})
}
