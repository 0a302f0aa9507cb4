package slacktest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
)

// Files: what people share with the bot, downloaded from the fake, and
// what the bot shares, uploaded to it in Slack's two steps
// (files.getUploadURLExternal, then files.completeUploadExternal).

// File is a file a person shares with the bot.
type File struct {
	Name    string
	MIME    string
	Content []byte
	// Type is Slack's filetype ("slack_audio" for a clip recorded in
	// Slack); Seconds, a recording's stated length.
	Type    string
	Seconds int
	// Stated is the size the event states; 0 states the content's.
	Stated int
}

// Upload is a file the bot shared in a conversation.
type Upload struct {
	Channel, Thread, Title string
	Content                []byte
}

// Downloads counts the bot's downloads of shared files.
func (s *Server) Downloads() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.downloads
}

// Uploads returns the files the bot shared.
func (s *Server) Uploads() []Upload { return s.uploads.All() }

// DMWithFile is a direct message sharing f, as Slack sends it (subtype
// file_share); the file downloads from this server with the bot token.
func (s *Server) DMWithFile(channel, user, text, ts string, f File) Event {
	s.mu.Lock()
	if s.files == nil {
		s.files = map[string]File{}
	}
	id := fmt.Sprintf("F%d", len(s.files)+1)
	s.files[id] = f
	s.mu.Unlock()
	e := DM(channel, user, text, ts)
	e["subtype"] = "file_share"
	size := f.Stated
	if size == 0 {
		size = len(f.Content)
	}
	file := map[string]any{"id": id, "name": f.Name, "mimetype": f.MIME, "size": size,
		"url_private_download": s.URL + "/files/" + id + "/" + f.Name}
	if f.Type != "" {
		file["filetype"] = f.Type
	}
	if f.Seconds > 0 {
		file["duration_ms"] = f.Seconds * 1000
	}
	e["files"] = []map[string]any{file}
	return e
}

// download serves a shared file to the bot's token only.
func (s *Server) download(w http.ResponseWriter, r *http.Request) {
	if !strings.HasPrefix(r.Header.Get("Authorization"), "Bearer xoxb-") {
		http.Error(w, "not authed", http.StatusForbidden)
		return
	}
	id, _, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/files/"), "/")
	s.mu.Lock()
	f, ok := s.files[id]
	s.downloads++
	s.mu.Unlock()
	if !ok {
		http.NotFound(w, r)
		return
	}
	w.Write(f.Content)
}

// uploadURL answers files.getUploadURLExternal: a new file id and the
// URL its bytes go to.
func (s *Server) uploadURL() map[string]any {
	s.mu.Lock()
	s.ts++
	id := fmt.Sprintf("FUP%d", s.ts)
	s.mu.Unlock()
	return map[string]any{"ok": true, "upload_url": s.URL + "/upload/" + id, "file_id": id}
}

// upload takes a file's bytes at its upload URL, as a multipart "file".
func (s *Server) upload(w http.ResponseWriter, r *http.Request) {
	id := strings.TrimPrefix(r.URL.Path, "/upload/")
	f, _, err := r.FormFile("file")
	if err != nil {
		http.Error(w, "no file", http.StatusBadRequest)
		return
	}
	content, _ := io.ReadAll(f)
	s.mu.Lock()
	if s.staged == nil {
		s.staged = map[string][]byte{}
	}
	s.staged[id] = content
	s.mu.Unlock()
	fmt.Fprint(w, "OK - "+strconv.Itoa(len(content)))
}

// completeUpload answers files.completeUploadExternal: the uploaded
// files are shared in the call's channel (and thread), in order, until
// one was not uploaded.
func (s *Server) completeUpload(c Call) map[string]any {
	var fs []struct {
		ID    string `json:"id"`
		Title string `json:"title"`
	}
	json.Unmarshal([]byte(c.Params["files"]), &fs)
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []map[string]any
	for _, f := range fs {
		content, ok := s.staged[f.ID]
		if !ok {
			return map[string]any{"ok": false, "error": "file_not_found"}
		}
		delete(s.staged, f.ID)
		record(s, &s.uploads, Upload{Channel: c.Params["channel_id"], Thread: c.Params["thread_ts"], Title: f.Title, Content: content})
		out = append(out, map[string]any{"id": f.ID, "title": f.Title})
	}
	return map[string]any{"ok": true, "files": out}
}
