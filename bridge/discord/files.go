package discord

import (
	"context"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/bwmarrin/discordgo"

	"loadout/bridge"
	"loadout/tools/files"
)

// maxDownload is the largest attachment taken: Discord's upload limit
// without Nitro or a boosted server. Larger ones are refused whatever
// size the message states, and a download stops there.
const maxDownload = 25 << 20

// keepFile downloads an attachment into the chat's workspace and
// returns the note the model reads about it, and its name when it is a
// picture the model may look at.
func (a *Adapter) keepFile(ctx context.Context, key string, f *discordgo.MessageAttachment) (note, image string) {
	name := f.Filename
	if name == "" {
		name = "attachment-" + f.ID
	}
	mimeType := f.ContentType
	if mimeType == "" {
		mimeType = "application/octet-stream"
	}
	mimeType, _, _ = strings.Cut(mimeType, ";")
	switch {
	case a.cfg.Files == nil:
		return bridge.FileNotKept(name, "files are not kept in this setup"), ""
	case f.Size > maxDownload:
		return bridge.FileNotKept(name, "I take files up to 25 MB"), ""
	}
	body, err := a.download(ctx, f.URL)
	if err != nil {
		a.log.Warn("discord: could not download a file a person sent", "file", name, "err", err)
		return bridge.FileNotKept(name, "it could not be downloaded from Discord"), ""
	}
	defer body.Close()
	saved, n, err := a.cfg.Files.Save(ctx, key, name, body)
	if err != nil {
		a.log.Warn("discord: could not keep a file a person sent", "file", name, "err", err)
		return bridge.FileNotKept(name, err.Error()), ""
	}
	if files.IsImage(mimeType) {
		image = saved
	}
	return bridge.FileNote(saved, mimeType, n), image
}

// download opens an attachment from Discord's CDN, held to maxDownload
// whatever size was stated: a larger body fails, and the saver removes
// what it wrote. The bot's token is not sent: the CDN's links are signed.
func (a *Adapter) download(ctx context.Context, url string) (io.ReadCloser, error) {
	if !strings.HasPrefix(url, "https://") && !strings.HasPrefix(url, "http://") {
		return nil, fmt.Errorf("discord: an attachment without a link")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := a.cfg.HTTPClient.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return nil, fmt.Errorf("the download answered %s", resp.Status)
	}
	return struct {
		io.Reader
		io.Closer
	}{bridge.Capped(resp.Body, maxDownload), resp.Body}, nil
}

// SendFile posts a workspace file to the route's conversation (as a
// follow-up only the person sees, for a slash command's answer in a
// server).
func (a *Adapter) SendFile(ctx context.Context, rt any, name string, f *os.File) error {
	r, err := asRoute(rt)
	if err != nil {
		return err
	}
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if st.Size() > maxDownload {
		return fmt.Errorf("discord: %s is %d bytes, more than the 25 MB a bot may upload", name, st.Size())
	}
	contentType := mime.TypeByExtension(strings.ToLower(filepath.Ext(name)))
	return a.retry(ctx, func(ctx context.Context) error {
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return err
		}
		file := &discordgo.File{Name: name, ContentType: contentType, Reader: f}
		if r.Token != "" && r.Ephemeral {
			_, err := a.api.FollowupMessageCreate(r.interaction(), true, &discordgo.WebhookParams{Files: []*discordgo.File{file},
				Flags: discordgo.MessageFlagsEphemeral, AllowedMentions: noMentions()}, discordgo.WithContext(ctx))
			return err
		}
		_, err := a.api.ChannelMessageSendComplex(r.Channel, &discordgo.MessageSend{Files: []*discordgo.File{file}, AllowedMentions: noMentions()},
			discordgo.WithContext(ctx))
		return err
	})
}
