package telegramtest

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// Files: those people send, which the bot looks up with getFile and
// downloads from /file/bot<token>/, and those the bot uploads with
// sendDocument, sendPhoto and sendVoice.

// File is a file a person sends, or one the bot uploaded.
type File struct {
	Name    string
	MIME    string
	Content []byte
	// Stated is the size the update states; 0 states the content's.
	Stated int
}

// size is the size the update states for f.
func (f File) size() int {
	if f.Stated != 0 {
		return f.Stated
	}
	return len(f.Content)
}

// Upload is one file the bot sent (sendDocument, sendPhoto or
// sendVoice).
type Upload struct {
	Method   string
	ChatID   string
	ThreadID string
	ReplyTo  string
	File
}

// Uploads returns the files the bot sent.
func (s *Server) Uploads() []Upload { return s.uploads.All() }

// attach gives msg, the message of update id, m's file in place of its
// text (which becomes the caption), as Telegram does, and keeps the file
// for getFile; s.mu must be held.
func (s *Server) attach(msg map[string]any, id int, m Message) {
	delete(msg, "text")
	delete(msg, "entities")
	if m.Text != "" {
		msg["caption"] = m.Text
		if ents := entities(m.Text); len(ents) > 0 {
			msg["caption_entities"] = ents
		}
	}
	if s.files == nil {
		s.files = map[string]File{}
	}
	fid := fmt.Sprintf("file-%d", id)
	for key, f := range map[string]*File{"voice": m.Voice, "audio": m.Audio, "video_note": m.VideoNote} {
		if f == nil {
			continue
		}
		s.files[fid] = *f
		att := map[string]any{"file_id": fid, "file_unique_id": "u" + fid, "duration": m.Seconds, "file_size": f.size()}
		if f.MIME != "" {
			att["mime_type"] = f.MIME
		}
		if f.Name != "" {
			att["file_name"] = f.Name
		}
		msg[key] = att
	}
	switch {
	case m.Voice != nil || m.Audio != nil || m.VideoNote != nil:
	case m.Document != nil:
		s.files[fid] = *m.Document
		msg["document"] = map[string]any{"file_id": fid, "file_unique_id": "u" + fid, "file_name": m.Document.Name,
			"mime_type": m.Document.MIME, "file_size": m.Document.size()}
	default:
		s.files[fid] = *m.Photo
		msg["photo"] = []map[string]any{
			{"file_id": fid + "-small", "file_unique_id": "small" + fid, "width": 90, "height": 90, "file_size": 10},
			{"file_id": fid, "file_unique_id": "u" + fid, "width": 800, "height": 800, "file_size": m.Photo.size()},
		}
	}
}

// getFile answers with where to download a file a person sent.
func (s *Server) getFile(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	f, ok := s.files[r.PostForm.Get("file_id")]
	s.mu.Unlock()
	if !ok {
		writeErr(w, 400, "Bad Request: invalid file_id", 0)
		return
	}
	writeOK(w, map[string]any{"file_id": r.PostForm.Get("file_id"), "file_size": len(f.Content), "file_path": "documents/" + r.PostForm.Get("file_id")})
}

// download serves the content of the file at path, as getFile gave it.
func (s *Server) download(w http.ResponseWriter, r *http.Request, path string) {
	s.mu.Lock()
	f, ok := s.files[strings.TrimPrefix(path, "documents/")]
	s.mu.Unlock()
	if !ok {
		http.NotFound(w, r)
		return
	}
	w.Write(f.Content)
}

// upload takes the file of a sendDocument, sendPhoto or sendVoice call
// (method) as a message the bot sent.
func (s *Server) upload(w http.ResponseWriter, r *http.Request, method string) {
	field := map[string]string{"sendDocument": "document", "sendPhoto": "photo", "sendVoice": "voice"}[method]
	fh := r.MultipartForm.File[field]
	if len(fh) != 1 {
		writeErr(w, 400, "Bad Request: there is no "+field+" in the request", 0)
		return
	}
	f, _ := fh[0].Open()
	content, _ := io.ReadAll(f)
	f.Close()
	s.mu.Lock()
	s.uploads.Add(Upload{Method: method, ChatID: r.PostForm.Get("chat_id"), ThreadID: r.PostForm.Get("message_thread_id"),
		ReplyTo: r.PostForm.Get("reply_to_message_id"),
		File:    File{Name: fh[0].Filename, MIME: fh[0].Header.Get("Content-Type"), Content: content}})
	id := s.nextMsg
	s.nextMsg++
	s.notify()
	s.mu.Unlock()
	writeOK(w, map[string]any{"message_id": id, "date": time.Now().Unix(), "chat": map[string]any{"id": r.PostForm.Get("chat_id"), "type": "private"}})
}
