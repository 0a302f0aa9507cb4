package matrix

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"maunium.net/go/mautrix/crypto/attachment"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"loadout/bridge"
	"loadout/tools/files"
)

// media is the file a message shares, as its sender states it.
type media struct {
	name, mimeType string
	size           int64
	seconds        int
	url            id.ContentURIString
	enc            *event.EncryptedFileInfo
}

func mediaOf(c *event.MessageEventContent) media {
	m := media{name: c.GetFileName(), url: c.URL, enc: c.File}
	if m.name == "" {
		m.name = "file"
	}
	m.name = filepath.Base(m.name)
	if c.Info != nil {
		m.mimeType, m.size = c.Info.MimeType, int64(c.Info.Size)
		m.seconds = c.Info.Duration / 1000
	}
	if c.MSC1767Audio != nil && m.seconds == 0 {
		m.seconds = c.MSC1767Audio.Duration / 1000
	}
	if m.enc != nil {
		m.url = m.enc.URL
	}
	if m.mimeType == "" {
		m.mimeType = "application/octet-stream"
	}
	return m
}

// keepFile downloads the file a message shares into the chat's
// workspace and returns the note the model reads about it.
func (a *Adapter) keepFile(ctx context.Context, key string, c *event.MessageEventContent) (note, image string) {
	m := mediaOf(c)
	switch {
	case a.cfg.Files == nil:
		return bridge.FileNotKept(m.name, "files are not kept in this setup"), ""
	case m.size > a.cfg.MaxFile:
		return bridge.FileNotKept(m.name, fmt.Sprintf("files larger than %d MB are not downloaded here", a.cfg.MaxFile>>20)), ""
	}
	body, err := a.download(ctx, m)
	if err != nil {
		a.log.Warn("matrix: could not download a file a person sent", "file", m.name, "err", err)
		return bridge.FileNotKept(m.name, "it could not be downloaded from the homeserver"), ""
	}
	defer body.Close()
	saved, n, err := a.cfg.Files.Save(ctx, key, m.name, body)
	if err != nil {
		a.log.Warn("matrix: could not keep a file a person sent", "file", m.name, "err", err)
		return bridge.FileNotKept(m.name, err.Error()), ""
	}
	if files.IsImage(m.mimeType) {
		image = saved
	}
	return bridge.FileNote(saved, m.mimeType, n), image
}

// download opens a shared file, held to MaxFile whatever size its
// message stated; an encrypted file is decrypted and its hash checked
// before anything of it is read.
func (a *Adapter) download(ctx context.Context, m media) (io.ReadCloser, error) {
	uri, err := m.url.Parse()
	if err != nil {
		return nil, fmt.Errorf("bad content uri %q: %w", m.url, err)
	}
	resp, err := a.cli.Download(ctx, uri)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("the download answered %s", resp.Status)
	}
	data, err := io.ReadAll(bridge.Capped(resp.Body, a.cfg.MaxFile))
	if err != nil {
		return nil, err
	}
	if m.enc != nil {
		if err := m.enc.DecryptInPlace(data); err != nil {
			return nil, fmt.Errorf("decrypt: %w", err)
		}
	}
	return io.NopCloser(bytes.NewReader(data)), nil
}

// takeVoice decides about an audio message by what its sender states,
// then downloads it into the chat's workspace: the note the pipeline
// transcribes, or a sentence that answers the person.
func (a *Adapter) takeVoice(ctx context.Context, key string, c *event.MessageEventContent) (note *bridge.VoiceNote, reply string, ok bool) {
	m := mediaOf(c)
	if reply, ok = a.pipe.VoiceRefusal(key, m.size, m.seconds); !ok || reply != "" {
		return nil, reply, ok
	}
	note, reply = a.pipe.KeepVoice(ctx, a.cfg.Files, key, m.name, m.seconds, a.cfg.MaxFile, func(ctx context.Context) (io.ReadCloser, error) {
		return a.download(ctx, m)
	})
	return note, reply, true
}

// upload puts data on the homeserver, encrypted when the room is: the
// message content's url, or its encrypted file.
func (a *Adapter) upload(ctx context.Context, room id.RoomID, c *event.MessageEventContent, data []byte, mimeType string) error {
	encrypted, err := a.states.IsEncrypted(ctx, room)
	if err != nil {
		return fmt.Errorf("matrix: is %s encrypted: %w", room, err)
	}
	if !encrypted {
		res, err := a.cli.UploadBytesWithName(ctx, data, mimeType, c.FileName)
		if err != nil {
			return fmt.Errorf("matrix: upload: %w", err)
		}
		c.URL = res.ContentURI.CUString()
		return nil
	}
	f := attachment.NewEncryptedFile()
	sealed := f.Encrypt(data)
	res, err := a.cli.UploadBytes(ctx, sealed, "application/octet-stream")
	if err != nil {
		return fmt.Errorf("matrix: upload: %w", err)
	}
	c.File = &event.EncryptedFileInfo{EncryptedFile: *f, URL: res.ContentURI.CUString()}
	return nil
}

// SendFile sends a workspace file to the route's room (and thread): an
// image as m.image, anything else as m.file.
func (a *Adapter) SendFile(ctx context.Context, rt any, name string, f *os.File) error {
	r, err := asRoute(rt)
	if err != nil {
		return err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	data, err := io.ReadAll(io.LimitReader(f, a.cfg.MaxFile+1))
	if err != nil {
		return err
	}
	if int64(len(data)) > a.cfg.MaxFile {
		return fmt.Errorf("matrix: %s is larger than matrix.max_file (%d bytes)", name, a.cfg.MaxFile)
	}
	mimeType := mime.TypeByExtension(strings.ToLower(filepath.Ext(name)))
	if mimeType == "" {
		mimeType = "application/octet-stream"
	}
	c := &event.MessageEventContent{MsgType: event.MsgFile, Body: name, FileName: name,
		Info: &event.FileInfo{MimeType: mimeType, Size: len(data)}, Mentions: &event.Mentions{}}
	if files.IsImage(mimeType) {
		c.MsgType = event.MsgImage
	}
	if err := a.upload(ctx, r.Room, c, data, mimeType); err != nil {
		return err
	}
	r.relate(c)
	_, err = a.send(ctx, r.Room, c)
	return err
}

// SendVoice sends OGG/Opus audio to the route as a voice message
// (m.audio marked org.matrix.msc3245.voice).
func (a *Adapter) SendVoice(ctx context.Context, rt any, audio []byte) error {
	r, err := asRoute(rt)
	if err != nil {
		return err
	}
	if len(audio) == 0 {
		return errors.New("matrix: no audio to send")
	}
	c := &event.MessageEventContent{MsgType: event.MsgAudio, Body: "answer.ogg", FileName: "answer.ogg",
		Info:         &event.FileInfo{MimeType: "audio/ogg", Size: len(audio)},
		MSC1767Audio: &event.MSC1767Audio{}, MSC3245Voice: &event.MSC3245Voice{}, Mentions: &event.Mentions{}}
	if err := a.upload(ctx, r.Room, c, audio, "audio/ogg"); err != nil {
		return err
	}
	r.relate(c)
	_, err = a.send(ctx, r.Room, c)
	return err
}
