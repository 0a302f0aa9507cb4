package whatsapptest

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
)

// Media: the files people send, looked up and downloaded with the token
// as from lookaside, and the files the bot uploads to send.

// File is a file the bot uploaded.
type File struct {
	Name, MimeType string
	Content        []byte
}

// personFile is a file a person sent, with the size stated of it.
type personFile struct {
	File
	size int
}

// FailDownloads makes the next n media downloads answer 500.
func (s *Server) FailDownloads(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.downloadFails = n
}

// Downloads counts the media download requests.
func (s *Server) Downloads() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.downloads
}

// putMedia keeps a person's file for lookup and download.
func (s *Server) putMedia(f *Media) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.next++
	id := fmt.Sprintf("%d", 900000000+s.next)
	size := f.Size
	if size == 0 {
		size = len(f.Content)
	}
	s.media[id] = personFile{File{Name: f.Name, MimeType: f.MimeType, Content: f.Content}, size}
	return id
}

// lookup answers a GET of media id: where to download it, and what it is.
func (s *Server) lookup(w http.ResponseWriter, id string) {
	s.mu.Lock()
	f, ok := s.media[id]
	s.mu.Unlock()
	if !ok {
		apiError(w, http.StatusBadRequest, 100, "Unsupported get request. Object with ID '"+id+"' does not exist")
		return
	}
	reply(w, map[string]any{"messaging_product": "whatsapp", "url": s.URL + "/download/" + id, "mime_type": f.MimeType,
		"sha256": sum(f.Content), "file_size": strconv.Itoa(f.size), "id": id})
}

// download serves a person's file, with the token, as lookaside does.
func (s *Server) download(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.downloads++
	fail := s.downloadFails > 0
	if fail {
		s.downloadFails--
	}
	f, ok := s.media[strings.TrimPrefix(r.URL.Path, "/download/")]
	s.mu.Unlock()
	s.changed.Notify()
	switch {
	case r.Header.Get("Authorization") != "Bearer "+Token:
		http.Error(w, "unauthorized", http.StatusUnauthorized)
	case fail:
		http.Error(w, "try again", http.StatusInternalServerError)
	case !ok:
		http.NotFound(w, r)
	default:
		w.Header().Set("Content-Type", f.MimeType)
		w.Write(f.Content)
	}
}

// upload takes a file the bot uploads.
func (s *Server) upload(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseMultipartForm(200 << 20); err != nil {
		apiError(w, http.StatusBadRequest, 100, "bad upload: "+err.Error())
		return
	}
	if r.FormValue("messaging_product") != "whatsapp" || r.FormValue("type") == "" {
		apiError(w, http.StatusBadRequest, 100, "Param messaging_product and type are required")
		return
	}
	file, h, err := r.FormFile("file")
	if err != nil {
		apiError(w, http.StatusBadRequest, 100, "Param file is required")
		return
	}
	defer file.Close()
	content, _ := io.ReadAll(file)
	mt, _, _ := mime.ParseMediaType(h.Header.Get("Content-Type"))
	s.mu.Lock()
	s.next++
	id := fmt.Sprintf("%d", 800000000+s.next)
	s.uploads[id] = File{Name: h.Filename, MimeType: mt, Content: content}
	s.mu.Unlock()
	reply(w, map[string]string{"id": id})
}

// uploaded is a file the bot uploaded, by media id.
func (s *Server) uploaded(id string) (File, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f, ok := s.uploads[id]
	return f, ok
}

func sum(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}
