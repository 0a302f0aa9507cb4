package mcp

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"loadout/tools"
)

// Pictures and sounds a tool returns are saved to the chat's files and
// named in the result; pictures go to the model as well, unless larger
// than maxPicture (then only saved).
func TestMediaAreSavedAndPicturesPassed(t *testing.T) {
	var mu sync.Mutex
	saved := map[string]int{}
	save := func(ctx context.Context, name string, data []byte) (string, error) {
		mu.Lock()
		defer mu.Unlock()
		if tools.CallerFrom(ctx).ChatKey != "console:local" {
			return "", fmt.Errorf("saved outside the caller's chat")
		}
		saved[name] = len(data)
		return name, nil
	}
	reg := newRegistry(t)
	c := New(Server{Name: "demo", transport: inMemory(t, nil)}, Deps{Save: save}, quiet)
	if err := Register(context.Background(), reg, c); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := runAs(t, reg, nil, "demo_picture", `{}`)
	if r.Status != tools.StatusSuccess || len(r.Images) != 1 || string(r.Images[0].Data) != "\x89PNG tiny" {
		t.Fatalf("result = %+v", r)
	}
	for _, want := range []string{"Here:", "[image image/png, 9 bytes, saved as demo-picture-1.png]", "[audio audio/wav, 4 bytes, saved as demo-picture-2.wav]"} {
		if !strings.Contains(r.Content, want) {
			t.Errorf("result lacks %q: %s", want, r.Content)
		}
	}
	r = runAs(t, reg, nil, "demo_picture", `{"huge":true}`)
	if len(r.Images) != 1 || !strings.Contains(r.Content, fmt.Sprintf("%d bytes, saved as", 6<<20)) {
		t.Fatalf("with a huge picture: %d images, %s", len(r.Images), r.Content)
	}
}
