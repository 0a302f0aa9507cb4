package main

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"

	"loadout/google/googletest"
	"loadout/google/workspace"
	"loadout/settings"
	"loadout/tools"
)

// Every Workspace group is made the same way (google.Group from the
// group's New, its tools as tools.New(definition, method)) and keeps the
// same rules: its name, its scopes, at most ten tools, every tool's
// effect declared, a summary for every tool that can need approval, and
// Google's errors mapped to tool errors the model can act on (a 404 is
// not_found, a 403 permission), never a raw or internal error.
func TestEveryGoogleGroupConforms(t *testing.T) {
	status := 404
	api := googletest.NewAPI(t)
	for _, m := range []string{"GET", "POST", "PUT", "PATCH", "DELETE"} {
		api.Handle(m+" /*", func(googletest.Request) (int, string) {
			return status, `{"error":{"code":` + map[int]string{404: "404", 403: "403"}[status] + `,"message":"nope","status":"X"}}`
		})
	}
	ctx := tools.WithCaller(context.Background(), tools.Caller{ChatKey: "telegram:42", UserKey: "telegram:42"})
	name := regexp.MustCompile(`^google_[a-z]+(_[a-z]+)?$`)
	toolName := regexp.MustCompile(`^[a-z]+(_[a-z]+)+$`)
	rng := rand.New(rand.NewPCG(28, 6))
	groups := workspace.All(settings.GoogleConfig{}, workspace.Deps{Save: func(_ context.Context, name string, _ []byte) (string, error) { return name, nil }})
	if len(groups) != 10 {
		t.Fatalf("%d Workspace groups, want 10", len(groups))
	}
	for _, build := range groups {
		g := build.New(api.Client())
		if g.Name != build.Name {
			t.Errorf("the group listed as %s is named %s", build.Name, g.Name)
		}
		if !name.MatchString(g.Name) || !strings.HasPrefix(g.DisplayName, "Google ") || g.Description == "" {
			t.Errorf("group %q (%q): a name google_<service>, a display name \"Google …\" and a description", g.Name, g.DisplayName)
		}
		if len(g.Scopes) == 0 {
			t.Errorf("%s asks for no scope", g.Name)
		}
		for _, s := range g.Scopes {
			if !strings.HasPrefix(s, "https://www.googleapis.com/auth/") {
				t.Errorf("%s: scope %q is not a Google API scope", g.Name, s)
			}
		}
		if n := len(g.Tools); n == 0 || n > 10 {
			t.Errorf("%s has %d tools; a group has one to ten", g.Name, n)
		}
		reg := tools.NewRegistry()
		if err := g.Register(reg); err != nil {
			t.Fatalf("%s: %v", g.Name, err)
		}
		cat := reg.Catalog(true, nil, nil)
		prefix := ""
		for _, tool := range g.Tools {
			d, _ := reg.Tool(tool.Name) // as registered: personal, with its examples
			word, _, _ := strings.Cut(d.Name, "_")
			if prefix == "" {
				prefix = word
			}
			if !toolName.MatchString(d.Name) || word != prefix {
				t.Errorf("%s: tool %q: names are <service>_<action>, one service word per group (%q)", g.Name, d.Name, prefix)
			}
			// What asks by default (tools.confirm: destructive) says in
			// its own words what it will do.
			if (d.Effect >= tools.EffectDestructive || d.EffectFor != nil) && d.Summarize == nil {
				t.Errorf("%s: %s can be destructive but has no summary of its own", g.Name, d.Name)
			}
			if !d.Personal {
				t.Errorf("%s: %s is not marked personal", g.Name, d.Name)
			}
			if len(d.Examples) == 0 {
				t.Errorf("%s: %s has no example requests for find_tools", g.Name, d.Name)
			}
			// Google's refusals reach the model as tool errors it can act
			// on. Calls refused before reaching Google (a bad generated
			// argument) are skipped; one of ten must reach it.
			for _, code := range []int{404, 403} {
				status = code
				want := map[int]string{404: tools.CodeNotFound, 403: tools.CodePermission}[code]
				reached, last := false, ""
				for range 10 {
					args, _ := generateArgs(rng, d.Name, tool.Parameters)
					before := len(api.Requests())
					res := tools.NewExecutor(reg, quietLog()).Run(ctx, cat, []tools.Call{{ID: "c1", Name: d.Name, Arguments: args}})[0]
					if len(api.Requests()) == before {
						last = args + " → " + res.Content
						continue
					}
					reached = true
					var e struct {
						Code string `json:"code"`
					}
					if json.Unmarshal([]byte(res.Content), &e); res.Status == tools.StatusSuccess && code == 403 {
						t.Errorf("%s: Google's %d taken for success: %s", d.Name, code, res.Content)
					} else if res.Status != tools.StatusSuccess && e.Code != want && e.Code != tools.CodeNotFound {
						t.Errorf("%s: Google's %d came back as %q, want %q: %s", d.Name, code, e.Code, want, res.Content)
					}
					break
				}
				if !reached {
					t.Errorf("%s: no generated call reached Google; last: %s", d.Name, last)
				}
			}
		}
	}
}
