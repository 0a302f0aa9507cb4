package mattermosttest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
)

// Files of posts, files the bot uploads, presses of buttons.

func (s *Server) download(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	f, ok := s.files[r.PathValue("id")]
	s.mu.Unlock()
	if !ok {
		reply(w, http.StatusNotFound, map[string]string{"id": "api.file.get_file.app_error"})
		return
	}
	w.Write(f.Content)
}

func (s *Server) upload(w http.ResponseWriter, r *http.Request) {
	if r.ParseMultipartForm(32<<20) != nil || r.FormValue("channel_id") == "" {
		reply(w, http.StatusBadRequest, map[string]string{"id": "api.file.upload_file.bad_parse.app_error"})
		return
	}
	infos := []map[string]any{}
	for _, fh := range r.MultipartForm.File["files"] {
		f, _ := fh.Open()
		b, _ := io.ReadAll(f)
		s.mu.Lock()
		id := s.id("f")
		s.files[id] = File{Name: fh.Filename, Content: b}
		s.mu.Unlock()
		infos = append(infos, map[string]any{"id": id, "name": fh.Filename, "size": len(b)})
	}
	reply(w, http.StatusCreated, map[string]any{"file_infos": infos})
}

// Press is user pressing button actionID of post id: its integration URL
// gets its context and the presser's id. It returns the HTTP status and
// the text shown to the presser alone.
func (s *Server) Press(user User, id, actionID string) (status int, ephemeral string, err error) {
	s.mu.Lock()
	p := s.byID[id]
	var atts []struct {
		Actions []struct {
			ID          string
			Integration struct{ URL, Context any }
		}
	}
	if p != nil {
		raw, _ := json.Marshal(p.Props["attachments"])
		json.Unmarshal(raw, &atts)
	}
	s.mu.Unlock()
	for _, a := range atts {
		for _, b := range a.Actions {
			if b.ID != actionID {
				continue
			}
			body, _ := json.Marshal(map[string]any{"user_id": user.ID, "user_name": user.Name, "post_id": id, "channel_id": p.Channel,
				"type": "button", "context": b.Integration.Context})
			resp, err := http.Post(fmt.Sprint(b.Integration.URL), "application/json", bytes.NewReader(body))
			if err != nil {
				return 0, "", err
			}
			defer resp.Body.Close()
			var out struct {
				Ephemeral string `json:"ephemeral_text"`
			}
			json.NewDecoder(resp.Body).Decode(&out)
			return resp.StatusCode, out.Ephemeral, nil
		}
	}
	return 0, "", fmt.Errorf("mattermosttest: post %s has no button %q", id, actionID)
}
