package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"loadout/tools"
)

// CodeToolError is the code of a call the server answered with an error.
const CodeToolError = "tool_error"

func (c *Client) unavailable(why string) *tools.Error {
	return &tools.Error{Code: tools.CodeUnavailable,
		Message:    fmt.Sprintf("The MCP server '%s' is not available (%s); loadout keeps restarting it.", c.srv.Name, firstLine(why, 200)),
		Suggestion: "Try again in a minute, or tell the person this service is down."}
}

// tool wraps one of the server's tools. names holds the loadout names
// given so far, to keep them unique.
func (c *Client) tool(t *sdk.Tool, names map[string]bool) tools.Tool {
	base := toolName(c.srv.Name, t.Name)
	name := base
	for i := 2; names[name] || name == tools.SamplingRuleTool; i++ {
		suffix := fmt.Sprintf("_%d", i)
		name = base[:min(len(base), 64-len(suffix))] + suffix
	}
	names[name] = true
	params, err := json.Marshal(t.InputSchema)
	if err != nil || t.InputSchema == nil || string(params) == "null" {
		params = json.RawMessage(`{"type":"object","properties":{}}`)
	}
	desc := t.Description
	if desc == "" {
		desc = t.Title
	}
	if desc == "" {
		desc = "The " + t.Name + " tool of the " + c.srv.Name + " MCP server."
	}
	def := tools.Definition{
		Name: name, Description: desc, Parameters: params, Timeout: c.srv.Timeout,
		ReadOnly: t.Annotations != nil && t.Annotations.ReadOnlyHint, Effect: effect(t.Annotations),
		// A server's results are not the person's words.
		Untrusted: true,
	}
	if tools.ActingWord(def) != "" && def.Effect < tools.EffectDestructive {
		// A tool that says it sends, deletes or shares is taken at its
		// word, whatever its hints say.
		def.ReadOnly, def.Effect = false, tools.EffectDestructive
	}
	remote := t.Name
	tl := tools.Raw(def, func(ctx context.Context, args json.RawMessage) (any, error) {
		return c.call(ctx, remote, args)
	})
	// A server's schema allows what it does not name unless it says
	// otherwise; its arguments pass on as the model wrote them.
	tl.Open = true
	return tl
}

// effect is a tool's effect from its annotations: read-only when it says
// so, destructive when it says so, mutating otherwise, no annotations
// included — an unknown tool is not trusted to be read-only. (The MCP
// specification's default for a tool that is not read-only is
// destructive; loadout asks for destructiveHint, so that a server's many
// unannotated tools do not each wait for an approval. Operators who want
// them to can set tools.confirm: mutating or tools.confirm_tools.)
func effect(a *sdk.ToolAnnotations) tools.Effect {
	switch {
	case a == nil:
		return tools.EffectMutate
	case a.ReadOnlyHint:
		return tools.EffectRead
	case a.DestructiveHint != nil && *a.DestructiveHint:
		return tools.EffectDestructive
	}
	return tools.EffectMutate
}

// call runs the server's tool remote.
func (c *Client) call(ctx context.Context, remote string, args json.RawMessage) (any, error) {
	var s *sdk.ClientSession
	if c.srv.Auth == AuthPerson {
		// The caller's own session: their token, never another's.
		var err error
		if s, err = c.personSession(ctx); err != nil {
			return nil, err
		}
	} else {
		c.mu.Lock()
		sess, down := c.sess, c.down
		c.mu.Unlock()
		if sess == nil {
			return nil, c.unavailable(down)
		}
		s = sess
	}
	c.offerRoot(ctx)
	call := &callState{ctx: ctx}
	c.mu.Lock()
	c.calls[call] = true
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.calls, call)
		c.mu.Unlock()
	}()
	res, err := s.CallTool(context.WithValue(ctx, callKey{}, call), &sdk.CallToolParams{Name: remote, Arguments: args})
	switch {
	case err == nil:
	case ctx.Err() != nil:
		return nil, ctx.Err()
	case errors.Is(err, sdk.ErrConnectionClosed) || isClosed(err):
		c.lost(s, err.Error())
		return nil, c.unavailable(err.Error())
	case needsTask(err.Error()):
		return nil, taskUnsupported()
	default:
		// A protocol error: the server refused the call itself (unknown
		// tool, arguments it rejects).
		return nil, &tools.Error{Code: tools.CodeInvalidArgument, Message: firstLine(err.Error(), 500),
			Suggestion: "Check the arguments against the tool's schema and call it again."}
	}
	if res.IsError && needsTask(render(res)) {
		return nil, taskUnsupported()
	}
	if res.IsError {
		return nil, &tools.Error{Code: CodeToolError, Message: firstLine(render(res), tools.MaxErrorMessage),
			Suggestion: "Read the error; fix the arguments or tell the person what failed."}
	}
	return c.media(ctx, remote, res), nil
}

// media is a successful result for the model: its text, with the
// pictures, sounds and files it returned saved to the chat's files and
// named there (files send passes them on to the person), and its
// pictures for a model that reads images.
func (c *Client) media(ctx context.Context, remote string, res *sdk.CallToolResult) any {
	var images []tools.Image
	n := 0
	save := func(kind, mime string, data []byte) string {
		desc := fmt.Sprintf("[%s %s, %d bytes", kind, mime, len(data))
		if c.deps.Save == nil {
			return desc + "]"
		}
		n++
		name, err := c.deps.Save(ctx, fmt.Sprintf("%s-%s-%d%s", c.srv.Name, toolName("x", remote)[2:], n, extension(mime)), data)
		if err != nil {
			c.log.Warn("a file an MCP tool returned could not be saved", "err", err)
			return desc + ", not saved]"
		}
		return desc + ", saved as " + name + "]"
	}
	var parts []string
	for _, ct := range res.Content {
		switch v := ct.(type) {
		case *sdk.ImageContent:
			parts = append(parts, save("image", v.MIMEType, v.Data))
			if isPicture(v.MIMEType) && len(v.Data) <= maxPicture {
				images = append(images, tools.Image{MIME: v.MIMEType, Data: v.Data})
			}
		case *sdk.AudioContent:
			parts = append(parts, save("audio", v.MIMEType, v.Data))
		case *sdk.EmbeddedResource:
			if v.Resource != nil && v.Resource.Text == "" && len(v.Resource.Blob) > 0 {
				parts = append(parts, save("resource "+v.Resource.URI, v.Resource.MIMEType, v.Resource.Blob))
				if isPicture(v.Resource.MIMEType) && len(v.Resource.Blob) <= maxPicture {
					images = append(images, tools.Image{MIME: v.Resource.MIMEType, Data: v.Resource.Blob})
				}
				continue
			}
			parts = append(parts, render(&sdk.CallToolResult{Content: []sdk.Content{v}}))
		default:
			parts = append(parts, render(&sdk.CallToolResult{Content: []sdk.Content{v}}))
		}
	}
	text := strings.Join(parts, "\n")
	if len(parts) == 0 {
		text = render(res)
	}
	if len(images) == 0 {
		return text
	}
	return tools.Media{Text: text, Images: images}
}

// maxPicture is the largest picture passed to the model (as for the
// pictures people send); a larger one is only saved and named.
const maxPicture = 5 << 20

// isPicture reports whether a model that reads images takes mime.
func isPicture(mime string) bool {
	switch mime {
	case "image/png", "image/jpeg", "image/gif", "image/webp":
		return true
	}
	return false
}

// extension is a file name's ending for mime.
func extension(mime string) string {
	switch mime {
	case "image/png":
		return ".png"
	case "image/jpeg":
		return ".jpg"
	case "image/gif":
		return ".gif"
	case "image/webp":
		return ".webp"
	case "audio/wav", "audio/x-wav":
		return ".wav"
	case "audio/mpeg":
		return ".mp3"
	case "audio/ogg":
		return ".ogg"
	case "application/pdf":
		return ".pdf"
	case "text/plain":
		return ".txt"
	}
	return ".bin"
}

// CodeUnsupported is the code of a call loadout's MCP client cannot make.
const CodeUnsupported = "unsupported"

// needsTask reports whether a server refused a call because the tool
// runs only as a task (the spec's task-augmented tools/call, with
// execution.taskSupport "required"), as the reference servers word it.
func needsTask(text string) bool {
	return strings.Contains(text, "task augmentation") || strings.Contains(text, "taskSupport")
}

// taskUnsupported answers a call to a tool that runs only as a task: the
// SDK (go-sdk v1.8.0) has no tasks, so loadout does not declare them.
func taskUnsupported() *tools.Error {
	return &tools.Error{Code: CodeUnsupported,
		Message:    "This tool runs only as a task (a task-augmented call), which loadout's MCP client does not support yet: its MCP library has no tasks.",
		Suggestion: "Tell the person this tool cannot be used from loadout; use another tool if one fits."}
}

// callState is one call running on the server: the context of the turn
// that made it (its caller and asker), and what the server asked during
// it.
type callState struct {
	ctx context.Context

	mu      sync.Mutex
	asked   int
	refused bool // the person declined a question of this call
	sampled int  // sampling requests of this call
}

type callKey struct{}

// admit counts a question of the call, refusing one past
// maxElicitations or after the person declined one.
func (s *callState) admit() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.refused:
		return errors.New("the person declined a question of this call already; loadout does not ask again")
	case s.asked >= maxElicitations:
		return fmt.Errorf("one call may ask the person at most %d questions", maxElicitations)
	}
	s.asked++
	return nil
}

// admitSample counts a sampling request of the call, refusing one past
// limit.
func (s *callState) admitSample(limit int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sampled >= limit {
		return fmt.Errorf("one call may make at most %d sampling requests (mcp.servers[].sampling_per_call)", limit)
	}
	s.sampled++
	return nil
}

func (s *callState) declined() {
	s.mu.Lock()
	s.refused = true
	s.mu.Unlock()
}

// callOf is the call a request of the server belongs to: the one whose
// context it came with (the SDK passes it for requests it fulfils during
// the call), else the one call running. With several running and none
// named, the request is refused rather than answered for the wrong
// person.
func (c *Client) callOf(ctx context.Context) (*callState, error) {
	if s, ok := ctx.Value(callKey{}).(*callState); ok {
		return s, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch len(c.calls) {
	case 0:
		return nil, errors.New("no call of this server is running; loadout answers a server's requests only during a call a person made")
	case 1:
		for s := range c.calls {
			return s, nil
		}
	}
	return nil, errors.New("several calls of this server are running and the request does not say which it belongs to")
}

func isClosed(err error) bool {
	s := err.Error()
	return strings.Contains(s, "connection closed") || strings.Contains(s, "EOF") || strings.Contains(s, "broken pipe")
}

// render turns a result's content into text for the model: text as is,
// other kinds described, structured content as JSON when there is no
// text.
func render(res *sdk.CallToolResult) string {
	var parts []string
	for _, ct := range res.Content {
		switch v := ct.(type) {
		case *sdk.TextContent:
			parts = append(parts, v.Text)
		case *sdk.ImageContent:
			parts = append(parts, fmt.Sprintf("[image %s, %d bytes]", v.MIMEType, len(v.Data)))
		case *sdk.AudioContent:
			parts = append(parts, fmt.Sprintf("[audio %s, %d bytes]", v.MIMEType, len(v.Data)))
		case *sdk.ResourceLink:
			parts = append(parts, fmt.Sprintf("[resource %s %s]", v.Name, v.URI))
		case *sdk.EmbeddedResource:
			if v.Resource != nil && v.Resource.Text != "" {
				parts = append(parts, v.Resource.Text)
			} else if v.Resource != nil {
				parts = append(parts, fmt.Sprintf("[resource %s, %d bytes]", v.Resource.URI, len(v.Resource.Blob)))
			}
		}
	}
	if len(parts) == 0 && res.StructuredContent != nil {
		if b, err := json.Marshal(res.StructuredContent); err == nil {
			return string(b)
		}
	}
	return strings.Join(parts, "\n")
}

// toolName is the loadout name of a server's tool: <server>_<tool>, in
// lower case with anything but a-z, 0-9 and _ made _, at most 64 bytes.
func toolName(server, tool string) string {
	var b strings.Builder
	b.WriteString(server)
	b.WriteByte('_')
	for _, r := range strings.ToLower(tool) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') || r == '_' {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()[:min(b.Len(), 64)]
}

// firstLine is s's first line, cut to max characters (never inside one).
func firstLine(s string, max int) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return tools.Shorten(s, max)
}
