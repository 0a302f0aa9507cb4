package store

import (
	"context"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"loadout/chat"
)

// TEST: the audit trail is append-only in the database itself: an UPDATE
// of it is refused by a trigger (on SQLite, and on PostgreSQL when the
// tests run there); a decision recorded twice for one call is kept once;
// pruning removes only what is older than the cut.
func TestAuditTrailIsAppendOnly(t *testing.T) {
	db, err := OpenTest(filepath.Join(t.TempDir(), "a.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	old := chat.AuditEntry{At: time.Now().AddDate(-2, 0, 0), ChatKey: "c", UserKey: "u", SessionID: 1, CallID: "a",
		Tool: "mail_send", Summary: "old", Decision: chat.AuditApproved, Outcome: "ran"}
	recent := old
	recent.At, recent.CallID, recent.Summary = time.Now(), "b", "recent"
	if err := db.Audit(ctx, old, recent, recent); err != nil {
		t.Fatal(err)
	}
	if err := db.Audit(ctx, recent); err != nil {
		t.Fatal(err)
	}
	if got, _ := db.AuditLog(ctx, "c", "", 10); len(got) != 2 {
		t.Fatalf("%d entries, want 2", len(got))
	}
	for _, q := range []string{
		`UPDATE audit_entries SET decision = 'denied'`,
		`UPDATE audit_entries SET summary = 'nothing happened' WHERE call_id = 'b'`,
	} {
		if err := db.db.Exec(q).Error; err == nil || !strings.Contains(err.Error(), "append-only") {
			t.Fatalf("%s: %v", q, err)
		}
	}
	n, err := db.PruneAudit(ctx, time.Now().AddDate(-1, 0, 0))
	if err != nil || n != 1 {
		t.Fatalf("pruned %d, %v", n, err)
	}
	got, _ := db.AuditLog(ctx, "c", "", 10)
	if len(got) != 1 || got[0].Summary != "recent" || got[0].Decision != chat.AuditApproved {
		t.Fatalf("left %+v", got)
	}
}

// TEST: the application has no path that updates or deletes the audit
// trail besides the pruning: in the store's code, only appendAudit,
// AuditLog and PruneAudit name its model, only PruneAudit deletes, and
// no SQL text updates or deletes audit_entries.
func TestAuditTrailHasNoUpdateOrDeletePath(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	allowed := map[string][]string{"models": nil, "appendAudit": {"Clauses", "Create"}, "AuditLog": {"Where", "Order", "Limit", "Find", "WithContext"}, "PruneAudit": {"Where", "Delete", "WithContext"}}
	fset := token.NewFileSet()
	seen := map[string]bool{}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(fset, name, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			uses := false
			var calls []string
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.Ident:
					if n.Name == "auditEntry" {
						uses = true
					}
				case *ast.SelectorExpr:
					calls = append(calls, n.Sel.Name)
				case *ast.BasicLit:
					s := strings.ToLower(n.Value)
					if strings.Contains(s, "audit_entries") && (strings.Contains(s, "update audit_entries") || strings.Contains(s, "delete from audit_entries")) {
						t.Errorf("%s: %s has SQL that changes the audit trail: %s", fset.Position(n.Pos()), fn.Name.Name, n.Value)
					}
				}
				return true
			})
			if !uses || fn.Name.Name == "TableName" {
				continue
			}
			may, known := allowed[fn.Name.Name]
			if !known {
				t.Errorf("%s names the audit trail's model; only %v may", fn.Name.Name, []string{"appendAudit", "AuditLog", "PruneAudit"})
				continue
			}
			seen[fn.Name.Name] = true
			for _, c := range calls {
				if slices.Contains([]string{"Update", "Updates", "UpdateColumn", "UpdateColumns", "Save", "Delete", "Exec", "Raw"}, c) && !slices.Contains(may, c) {
					t.Errorf("%s calls %s on the audit trail", fn.Name.Name, c)
				}
			}
		}
	}
	if len(seen) != len(allowed) {
		t.Fatalf("found %v of %v: the check no longer sees the code", seen, allowed)
	}
}
