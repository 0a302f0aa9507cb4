package telegram

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path"
	"strconv"
	"strings"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"

	"loadout/bridge"
	"loadout/tools/files"
)

// maxDownload is the largest file the Bot API lets a bot download.
const maxDownload = 20 << 20

// keepFile downloads the document or the largest photo of m into the
// chat's workspace and returns the note the model reads about it.
func (a *Adapter) keepFile(ctx context.Context, chatKey string, m *message) (note, image string) {
	var id, name, mimeType string
	var size int
	switch {
	case m.Document != nil:
		id, name, mimeType, size = m.Document.FileID, m.Document.FileName, m.Document.MimeType, m.Document.FileSize
		if name == "" {
			name = "document"
		}
	default:
		p := m.Photo[len(m.Photo)-1] // Telegram lists sizes smallest first
		id, name, mimeType, size = p.FileID, "photo-"+p.FileUniqueID+".jpg", "image/jpeg", p.FileSize
	}
	if mimeType == "" {
		mimeType = "application/octet-stream"
	}
	switch {
	case a.cfg.Files == nil:
		return bridge.FileNotKept(name, "files are not kept in this setup"), ""
	case size > maxDownload:
		return bridge.FileNotKept(name, "Telegram lets bots download files up to 20 MB"), ""
	}
	body, err := a.download(ctx, id)
	if err != nil {
		a.log.Warn("telegram: could not download a file a person sent", "file", name, "err", err)
		return bridge.FileNotKept(name, "it could not be downloaded from Telegram"), ""
	}
	defer body.Close()
	saved, n, err := a.cfg.Files.Save(ctx, chatKey, name, body)
	if err != nil {
		a.log.Warn("telegram: could not keep a file a person sent", "file", name, "err", err)
		return bridge.FileNotKept(name, err.Error()), ""
	}
	if files.IsImage(mimeType) {
		image = saved
	}
	return bridge.FileNote(saved, mimeType, n), image
}

// download asks getFile for the file's path and opens it.
func (a *Adapter) download(ctx context.Context, fileID string) (io.ReadCloser, error) {
	resp, err := a.call(ctx, "getFile", tgbotapi.Params{"file_id": fileID})
	if err != nil {
		return nil, err
	}
	var f struct {
		Path string `json:"file_path"`
	}
	if err := json.Unmarshal(resp.Result, &f); err != nil || f.Path == "" {
		return nil, fmt.Errorf("getFile answered without a path: %s", resp.Result)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf(a.cfg.FileEndpoint, a.cfg.Token, f.Path), nil)
	if err != nil {
		return nil, err
	}
	r, err := a.cfg.HTTPClient.Do(req)
	if err != nil {
		return nil, errors.New(strings.ReplaceAll(err.Error(), a.cfg.Token, "<token>"))
	}
	if r.StatusCode != http.StatusOK {
		r.Body.Close()
		return nil, fmt.Errorf("the file download answered %s", r.Status)
	}
	// Held to what a bot may download whatever size the update stated: a
	// larger body fails, and the saver removes what it wrote.
	return struct {
		io.Reader
		io.Closer
	}{bridge.Capped(r.Body, maxDownload), r.Body}, nil
}

// photoTypes are sent as photos, shown in the chat; other files as
// documents.
var photoTypes = map[string]bool{".jpg": true, ".jpeg": true, ".png": true, ".webp": true}

// SendFile sends a workspace file to the route's chat (and topic): a
// photo up to 10 MB as a photo, anything else as a document.
func (a *Adapter) SendFile(ctx context.Context, route any, name string, f *os.File) error {
	r, err := asRoute(route)
	if err != nil {
		return err
	}
	st, err := f.Stat()
	if err != nil {
		return err
	}
	method, field := "sendDocument", "document"
	if photoTypes[strings.ToLower(path.Ext(name))] && st.Size() <= 10<<20 {
		method, field = "sendPhoto", "photo"
	}
	params := tgbotapi.Params{"chat_id": strconv.FormatInt(r.ChatID, 10)}
	if r.ThreadID != 0 {
		params["message_thread_id"] = strconv.Itoa(r.ThreadID)
	}
	return a.policy(callAttempts).Do(ctx, retryable, func(ctx context.Context) error {
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return err
		}
		_, err := a.api(ctx).UploadFiles(method, params, []tgbotapi.RequestFile{{Name: field, Data: tgbotapi.FileReader{Name: name, Reader: f}}})
		return err
	})
}
