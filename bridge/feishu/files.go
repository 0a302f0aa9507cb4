package feishu

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"loadout/bridge"
	"loadout/chat"
	"loadout/tools/files"
)

// MaxFile is the largest file taken: Feishu's limit for a message's
// resource (100 MB). A download stops there whatever is stated.
const MaxFile = 100 << 20

// MaxUpload is the largest file the bot sends: Feishu's limit for an
// uploaded file (30 MB).
const MaxUpload = 30 << 20

// TextFileFailed answers a file that could not be downloaded from
// Feishu after several tries; %s is its name.
const TextFileFailed = "Sorry, I couldn't download your file %s from Feishu, even after several tries. Please send it again in a moment."

// resource is a file in a person's message: the message, the file's
// key, its name and its type for the resources endpoint (file or image).
type resource struct {
	Message, Key, Name, Type string
}

// keepFile downloads a file or picture a person sent into the chat's
// workspace, trying again with backoff, and returns the note the model
// reads about it (and its name when the model may look at it), or the
// sentence that answers the person when it could not be downloaded.
func (a *Adapter) keepFile(ctx context.Context, key string, f resource) (note, image, reply string) {
	if a.cfg.Files == nil {
		return bridge.FileNotKept(f.Name, "files are not kept in this setup"), "", ""
	}
	var saved, mimeType string
	var size int64
	err := a.api.call(ctx, "download a file", sendAttempts, func(ctx context.Context, token string) error {
		path := "/open-apis/im/v1/messages/" + url.PathEscape(f.Message) + "/resources/" + url.PathEscape(f.Key) + "?type=" + f.Type
		resp, err := a.api.request(ctx, http.MethodGet, path, token, nil, "")
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			var env struct {
				Code int    `json:"code"`
				Msg  string `json:"msg"`
			}
			json.NewDecoder(io.LimitReader(resp.Body, 1<<16)).Decode(&env)
			return &APIError{Status: resp.StatusCode, Code: env.Code, Msg: env.Msg, after: waitOf(resp.Header)}
		}
		mimeType, _, _ = strings.Cut(resp.Header.Get("Content-Type"), ";")
		name := f.Name
		if f.Type == "image" {
			name += extension(mimeType, ".png")
		}
		saved, size, err = a.cfg.Files.Save(ctx, key, name, bridge.Capped(resp.Body, a.cfg.maxFile))
		return err
	})
	switch {
	case errors.Is(err, bridge.ErrTooLarge):
		return bridge.FileNotKept(f.Name, fmt.Sprintf("it is larger than %d MB", a.cfg.maxFile>>20)), "", ""
	case err != nil:
		a.log.Error("feishu: a file a person sent could not be downloaded; they are told", "file", f.Name, "err", err)
		return "", "", fmt.Sprintf(TextFileFailed, f.Name)
	}
	mimeType = strings.TrimSpace(mimeType)
	if mimeType == "" {
		mimeType = "application/octet-stream"
	}
	if files.IsImage(mimeType) {
		image = saved
	}
	return bridge.FileNote(saved, mimeType, size), image, ""
}

// extension is the usual extension of a type, or def.
func extension(mimeType, def string) string {
	if exts, _ := mime.ExtensionsByType(strings.TrimSpace(mimeType)); len(exts) > 0 {
		return exts[0]
	}
	return def
}

// fileType is the type Feishu's upload takes a file as: pdf and office
// documents by name, anything else as a stream.
func fileType(name string) string {
	switch ext := strings.ToLower(filepath.Ext(name)); ext {
	case ".pdf":
		return "pdf"
	case ".doc", ".docx":
		return "doc"
	case ".xls", ".xlsx":
		return "xls"
	case ".ppt", ".pptx":
		return "ppt"
	case ".mp4":
		return "mp4"
	}
	return "stream"
}

// SendFile uploads a workspace file and sends it to the route's chat as
// a file message under its name.
func (a *Adapter) SendFile(ctx context.Context, rt any, name string, f *os.File) error {
	r, err := asRoute(rt)
	if err != nil {
		return err
	}
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if st.Size() > MaxUpload || st.Size() == 0 {
		return fmt.Errorf("feishu: %s is %d bytes; Feishu takes files of 1 byte to 30 MB", name, st.Size())
	}
	var out struct {
		FileKey string `json:"file_key"`
	}
	err = a.api.call(ctx, "upload a file", sendAttempts, func(ctx context.Context, token string) error {
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return err
		}
		pr, pw := io.Pipe()
		mw := multipart.NewWriter(pw)
		done := make(chan struct{})
		go func() {
			defer close(done)
			mw.WriteField("file_type", fileType(name))
			mw.WriteField("file_name", name)
			part, err := mw.CreateFormFile("file", name)
			if err == nil {
				_, err = io.Copy(part, f)
			}
			if err == nil {
				err = mw.Close()
			}
			pw.CloseWithError(err)
		}()
		err := a.api.send(ctx, http.MethodPost, "/open-apis/im/v1/files", token, pr, mw.FormDataContentType(), &out)
		pr.CloseWithError(errors.New("feishu: the upload ended"))
		<-done // the file is not read any more: the next try may seek it
		return err
	})
	if err != nil {
		return err
	}
	_, err = a.api.message(ctx, r, "file", map[string]string{"file_key": out.FileKey}, "")
	return err
}

// Feishu sends a file (or a picture) and the words that go with it as
// two messages. A file sent alone is kept in the chat's workspace at
// once, and what the model reads about it waits, in the store, for the
// person's next message, which it goes before.

// kept is what waits for a chat's next message: the files' notes, and
// the ids of the last file events taken, so one delivered again is
// recognised.
type kept struct {
	Files  []keptFile `json:"files,omitempty"`
	Events []string   `json:"events,omitempty"`
}

type keptFile struct {
	Note  string `json:"note"`
	Image string `json:"image,omitempty"`
}

// keptEvents is how many file events a chat remembers.
const keptEvents = 32

func keptKey(chatKey string) string { return "feishu:next:" + chatKey }

// fileAlone takes a message that is a file or a picture: kept for the
// person's next message, or, when it could not be downloaded, answered
// with why. An error means it was not taken.
func (a *Adapter) fileAlone(ctx context.Context, event string, e messageEvent, key string, r route) error {
	ref := eventRef(event)
	if seen, err := a.pipe.Seen(ctx, ref); err == nil && seen {
		return nil
	}
	k, err := a.readKept(ctx, key)
	if err != nil {
		return err
	}
	if slices.Contains(k.Events, event) {
		return nil // delivered again
	}
	m := e.Message
	var c struct {
		FileKey  string `json:"file_key"`
		FileName string `json:"file_name"`
		ImageKey string `json:"image_key"`
	}
	json.Unmarshal([]byte(m.Content), &c)
	f := resource{Message: m.MessageID, Key: c.FileKey, Name: c.FileName, Type: "file"}
	if m.MessageType == "image" {
		f = resource{Message: m.MessageID, Key: c.ImageKey, Name: "image-" + c.ImageKey, Type: "image"}
	}
	if !plainID(f.Key) || !plainID(m.MessageID) {
		return nil
	}
	if f.Name == "" {
		f.Name = "file-" + f.Key
	}
	note, image, reply := a.keepFile(ctx, key, f)
	if reply != "" {
		_, err := a.pipe.Receive(ctx, ref, nil, func() (bridge.Pending, bool) {
			return bridge.Pending{Inbound: chat.Inbound{ChatKey: key, UserKey: "feishu:" + e.Sender.SenderID.OpenID}, Route: r.encode(), Reply: reply}, true
		})
		return err
	}
	return a.changeKept(ctx, key, func(k *kept) bool {
		if slices.Contains(k.Events, event) {
			return false
		}
		k.Files = append(k.Files, keptFile{Note: note, Image: image})
		k.Events = append(k.Events, event)
		if len(k.Events) > keptEvents {
			k.Events = k.Events[len(k.Events)-keptEvents:]
		}
		return true
	})
}

// takeFiles takes what waits for chat's next message.
func (a *Adapter) takeFiles(ctx context.Context, chatKey string) (kept, error) {
	var taken kept
	err := a.changeKept(ctx, chatKey, func(k *kept) bool {
		taken.Files, k.Files = k.Files, nil
		return len(taken.Files) > 0
	})
	return taken, err
}

// readKept reads what waits for chat's next message.
func (a *Adapter) readKept(ctx context.Context, chatKey string) (kept, error) {
	var k kept
	raw, err := a.store.State(ctx, keptKey(chatKey))
	if err == nil && raw != "" {
		json.Unmarshal([]byte(raw), &k)
	}
	return k, err
}

// changeKept changes what waits for chat's next message with change
// (false: nothing to change), read and swapped until no other process
// changed it meanwhile.
func (a *Adapter) changeKept(ctx context.Context, chatKey string, change func(*kept) bool) error {
	for {
		old, err := a.store.State(ctx, keptKey(chatKey))
		if err != nil {
			return err
		}
		var k kept
		if old != "" {
			json.Unmarshal([]byte(old), &k)
		}
		if !change(&k) {
			return nil
		}
		b, _ := json.Marshal(k)
		if ok, err := a.store.SwapState(ctx, keptKey(chatKey), old, string(b)); err != nil || ok {
			return err
		}
	}
}
