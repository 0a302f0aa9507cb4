package drive_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"strings"
	"testing"

	"loadout/google"
	"loadout/google/drive"
	"loadout/google/googletest"
	"loadout/tools"
)

const user = "telegram:1"

// run calls one tool through a registry and executor, as the engine does.
func run(t *testing.T, c google.Client, name, args string) tools.Result {
	t.Helper()
	return googletest.Call(t, drive.New(c, drive.Options{Backoff: googletest.Backoff, MaxReadChars: 50}), user, name, args)
}

var (
	decode    = googletest.Decode
	wantError = googletest.WantError
	check     = googletest.Check
)

func TestGroupDefinition(t *testing.T) {
	dg := drive.New(&googletest.Client{}, drive.Options{})
	g, ts := dg.Group, dg.Tools
	if g.Name != "google_drive" || g.DisplayName == "" || g.Description == "" {
		t.Fatalf("group = %+v", g)
	}
	var names []string
	readOnly := map[string]bool{}
	for _, tl := range ts {
		names = append(names, tl.Name)
		readOnly[tl.Name] = tl.ReadOnly
	}
	check(t, "tools", strings.Join(names, " "),
		"drive_search drive_get drive_read drive_export drive_create_file drive_create_folder drive_move drive_share drive_unshare drive_trash")
	if !readOnly["drive_search"] || !readOnly["drive_read"] || readOnly["drive_trash"] || readOnly["drive_share"] {
		t.Errorf("read-only flags = %v", readOnly)
	}
}

func TestSearch(t *testing.T) {
	f := googletest.NewStrictAPI(t, user)
	f.Handle("GET /drive/v3/files", func(r googletest.Request) (int, string) {
		check(t, "q", r.Query.Get("q"), `trashed = false and name contains 'Q3 \'plan\'' and mimeType = 'application/vnd.google-apps.spreadsheet' and 'fold1' in parents`)
		check(t, "pageSize", r.Query.Get("pageSize"), "5")
		check(t, "orderBy", r.Query.Get("orderBy"), "modifiedTime desc")
		check(t, "pageToken", r.Query.Get("pageToken"), "tok1")
		check(t, "supportsAllDrives", r.Query.Get("supportsAllDrives"), "true")
		if !strings.Contains(r.Query.Get("fields"), "files(id,name,mimeType") {
			t.Errorf("fields = %q", r.Query.Get("fields"))
		}
		return 200, `{
 "kind": "drive#fileList",
 "nextPageToken": "tok2",
 "incompleteSearch": false,
 "files": [
  {"kind": "drive#file", "id": "1aBc", "name": "Q3 'plan'", "mimeType": "application/vnd.google-apps.spreadsheet",
   "modifiedTime": "2024-09-30T12:01:02.345Z", "webViewLink": "https://docs.google.com/spreadsheets/d/1aBc/edit?usp=drivesdk", "parents": ["fold1"]},
  {"kind": "drive#file", "id": "2dEf", "name": "notes.txt", "mimeType": "text/plain", "size": "1234",
   "modifiedTime": "2024-09-01T08:00:00.000Z", "webViewLink": "https://drive.google.com/file/d/2dEf/view?usp=drivesdk"}
 ]
}`
	})
	m := decode(t, run(t, f.Client(), "drive_search", `{"name":"Q3 'plan'","type":"spreadsheet","folder_id":"fold1","max_results":5,"page_token":"tok1"}`))
	check(t, "next_page_token", m["next_page_token"], "tok2")
	files := m["files"].([]any)
	first := files[0].(map[string]any)
	check(t, "first", first, map[string]any{"id": "1aBc", "name": "Q3 'plan'", "type": "spreadsheet",
		"modified": "2024-09-30T12:01:02Z", "link": "https://docs.google.com/spreadsheets/d/1aBc/edit?usp=drivesdk"})
	second := files[1].(map[string]any)
	check(t, "second type", second["type"], "text/plain")
	check(t, "second size", second["size"], 1234)
}

func TestSearchFullTextHasNoOrder(t *testing.T) {
	f := googletest.NewStrictAPI(t, user)
	f.Handle("GET /drive/v3/files", func(r googletest.Request) (int, string) {
		check(t, "q", r.Query.Get("q"), `trashed = false and fullText contains 'budget' and mimeType contains 'image/'`)
		check(t, "orderBy", r.Query.Get("orderBy"), "")
		check(t, "pageSize", r.Query.Get("pageSize"), "20")
		return 200, `{"kind":"drive#fileList","files":[]}`
	})
	m := decode(t, run(t, f.Client(), "drive_search", `{"text":"budget","type":"image"}`))
	check(t, "files", m["files"], []any{})
}

func TestSearchValidatesArguments(t *testing.T) {
	f := googletest.NewStrictAPI(t, user)
	wantError(t, run(t, f.Client(), "drive_search", `{"max_results":500}`), tools.CodeInvalidArgument, "max_results")
	wantError(t, run(t, f.Client(), "drive_search", `{"type":"movie"}`), tools.CodeInvalidArgument, "type")
	wantError(t, run(t, f.Client(), "drive_search", `{"max_results":"ten"}`), tools.CodeInvalidArgument, "max_results")
}

func TestGet(t *testing.T) {
	f := googletest.NewStrictAPI(t, user)
	f.Handle("GET /drive/v3/files/1aBc", func(r googletest.Request) (int, string) {
		if !strings.Contains(r.Query.Get("fields"), "permissions(") {
			t.Errorf("fields = %q", r.Query.Get("fields"))
		}
		return 200, `{
 "id": "1aBc", "name": "Plan", "mimeType": "application/vnd.google-apps.document",
 "description": "Quarter plan", "parents": ["0AFolder"], "webViewLink": "https://docs.google.com/document/d/1aBc/edit",
 "createdTime": "2024-01-02T03:04:05.000Z", "modifiedTime": "2024-02-02T03:04:05.000Z", "shared": true,
 "owners": [{"kind": "drive#user", "displayName": "Ana Lima", "emailAddress": "ana@example.com", "me": true}],
 "permissions": [
  {"kind": "drive#permission", "id": "0123", "type": "user", "role": "owner", "emailAddress": "ana@example.com"},
  {"kind": "drive#permission", "id": "anyoneWithLink", "type": "anyone", "role": "reader"}
 ]
}`
	})
	m := decode(t, run(t, f.Client(), "drive_get", `{"file_id":"1aBc"}`))
	check(t, "type", m["type"], "document")
	check(t, "mime_type", m["mime_type"], "application/vnd.google-apps.document")
	check(t, "owners", m["owners"], []any{"Ana Lima <ana@example.com>"})
	check(t, "parents", m["parents"], []any{"0AFolder"})
	check(t, "created", m["created"], "2024-01-02T03:04:05Z")
	check(t, "access", m["access"], []any{
		map[string]any{"who": "ana@example.com", "role": "owner", "permission_id": "0123"},
		map[string]any{"who": "anyone with the link", "role": "reader", "permission_id": "anyoneWithLink"},
	})
	wantError(t, run(t, f.Client(), "drive_get", `{}`), tools.CodeMissingParameter, "file_id")
}

func TestReadExportsGoogleDocs(t *testing.T) {
	for _, tc := range []struct {
		mime, export, note string
	}{
		{"application/vnd.google-apps.document", "text/plain", ""},
		{"application/vnd.google-apps.presentation", "text/plain", ""},
		{"application/vnd.google-apps.spreadsheet", "text/csv", "first sheet"},
	} {
		t.Run(tc.export+tc.mime, func(t *testing.T) {
			f := googletest.NewStrictAPI(t, user)
			f.Handle("GET /drive/v3/files/doc1", func(r googletest.Request) (int, string) {
				return 200, fmt.Sprintf(`{"id":"doc1","name":"Plan","mimeType":%q}`, tc.mime)
			})
			f.Handle("GET /drive/v3/files/doc1/export", func(r googletest.Request) (int, string) {
				check(t, "mimeType", r.Query.Get("mimeType"), tc.export)
				return 200, "Hello, plan.\r\nSecond line."
			})
			m := decode(t, run(t, f.Client(), "drive_read", `{"file_id":"doc1"}`))
			check(t, "content", m["content"], "Hello, plan.\r\nSecond line.")
			check(t, "truncated", m["truncated"], nil)
			if !strings.Contains(fmt.Sprint(m["note"]), tc.note) {
				t.Errorf("note = %v, want it to mention %q", m["note"], tc.note)
			}
		})
	}
}

func TestReadTextFileIsCapped(t *testing.T) {
	f := googletest.NewStrictAPI(t, user)
	f.Handle("GET /drive/v3/files/txt1", func(r googletest.Request) (int, string) {
		if r.Query.Get("alt") == "media" {
			return 200, strings.Repeat("é", 30) + strings.Repeat("x", 40)
		}
		return 200, `{"id":"txt1","name":"long.txt","mimeType":"text/plain","size":"100"}`
	})
	m := decode(t, run(t, f.Client(), "drive_read", `{"file_id":"txt1"}`))
	check(t, "content", m["content"], strings.Repeat("é", 30)+strings.Repeat("x", 20))
	check(t, "truncated", m["truncated"], true)
	check(t, "next_offset", m["next_offset"], 50)
	if !strings.Contains(fmt.Sprint(m["note"]), "offset 50") {
		t.Errorf("note = %v", m["note"])
	}
	m = decode(t, run(t, f.Client(), "drive_read", `{"file_id":"txt1","offset":50,"max_chars":30}`))
	check(t, "content", m["content"], strings.Repeat("x", 20))
	check(t, "truncated", m["truncated"], nil)
	wantError(t, run(t, f.Client(), "drive_read", `{"file_id":"txt1","max_chars":51}`), tools.CodeInvalidArgument, "max_chars")
}

func TestReadFollowsShortcut(t *testing.T) {
	f := googletest.NewStrictAPI(t, user)
	f.Handle("GET /drive/v3/files/sc1", func(r googletest.Request) (int, string) {
		return 200, `{"id":"sc1","name":"Plan shortcut","mimeType":"application/vnd.google-apps.shortcut",
 "shortcutDetails":{"targetId":"doc1","targetMimeType":"application/vnd.google-apps.document"}}`
	})
	f.Handle("GET /drive/v3/files/doc1", func(r googletest.Request) (int, string) {
		return 200, `{"id":"doc1","name":"Plan","mimeType":"application/vnd.google-apps.document"}`
	})
	f.Handle("GET /drive/v3/files/doc1/export", func(r googletest.Request) (int, string) { return 200, "plan" })
	m := decode(t, run(t, f.Client(), "drive_read", `{"file_id":"sc1"}`))
	check(t, "id", m["id"], "doc1")
	check(t, "content", m["content"], "plan")
}

func TestReadRefusesBinaryFiles(t *testing.T) {
	f := googletest.NewStrictAPI(t, user)
	f.Handle("GET /drive/v3/files/img1", func(r googletest.Request) (int, string) {
		return 200, `{"id":"img1","name":"cat.png","mimeType":"image/png","size":"52000"}`
	})
	wantError(t, run(t, f.Client(), "drive_read", `{"file_id":"img1"}`), tools.CodeInvalidArgument, "cannot be read as text")
	f.Handle("GET /drive/v3/files/bin1", func(r googletest.Request) (int, string) {
		if r.Query.Get("alt") == "media" {
			return 200, "\x00\x01\x02"
		}
		return 200, `{"id":"bin1","name":"blob","mimeType":"application/octet-stream"}`
	})
	wantError(t, run(t, f.Client(), "drive_read", `{"file_id":"bin1"}`), tools.CodeInvalidArgument, "not a text file")
}

func TestReadExportTooLarge(t *testing.T) {
	f := googletest.NewStrictAPI(t, user)
	f.Handle("GET /drive/v3/files/big", func(r googletest.Request) (int, string) {
		return 200, `{"id":"big","name":"Huge","mimeType":"application/vnd.google-apps.document"}`
	})
	f.Handle("GET /drive/v3/files/big/export", func(r googletest.Request) (int, string) {
		return 403, googletest.ErrorBody(403, "exportSizeLimitExceeded", "This file is too large to be exported.")
	})
	wantError(t, run(t, f.Client(), "drive_read", `{"file_id":"big"}`), tools.CodeInvalidArgument, "too large")
}

// multipartParts splits a multipart upload body into its parts.
func multipartParts(t *testing.T, r googletest.Request) (meta map[string]any, mediaType, media string) {
	t.Helper()
	mt, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/related" {
		t.Fatalf("Content-Type = %q", r.Header.Get("Content-Type"))
	}
	mr := multipart.NewReader(strings.NewReader(r.Body), params["boundary"])
	p, err := mr.NextPart()
	if err != nil {
		t.Fatal(err)
	}
	if err := json.NewDecoder(p).Decode(&meta); err != nil {
		t.Fatal(err)
	}
	p, err = mr.NextPart()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(p)
	return meta, p.Header.Get("Content-Type"), string(b)
}

func TestCreateFileUploads(t *testing.T) {
	f := googletest.NewStrictAPI(t, user)
	f.Handle("POST /upload/drive/v3/files", func(r googletest.Request) (int, string) {
		check(t, "uploadType", r.Query.Get("uploadType"), "multipart")
		meta, mt, media := multipartParts(t, r)
		check(t, "metadata", meta, map[string]any{"name": "notes.md", "mimeType": "text/markdown", "parents": []any{"fold1"}})
		check(t, "media type", mt, "text/markdown")
		check(t, "media", media, "# Notes\nhello")
		return 200, `{"id":"new1","name":"notes.md","mimeType":"text/markdown","size":"13","parents":["fold1"],
 "modifiedTime":"2024-10-01T10:00:00.000Z","webViewLink":"https://drive.google.com/file/d/new1/view?usp=drivesdk"}`
	})
	m := decode(t, run(t, f.Client(), "drive_create_file", `{"name":"notes.md","content":"# Notes\nhello","folder_id":"fold1","mime_type":"text/markdown"}`))
	check(t, "id", m["id"], "new1")
	check(t, "link", m["link"], "https://drive.google.com/file/d/new1/view?usp=drivesdk")
	check(t, "uploads", f.Count("POST /upload/drive/v3/files"), 1)
}

func TestCreateFileConverts(t *testing.T) {
	f := googletest.NewStrictAPI(t, user)
	f.Handle("POST /upload/drive/v3/files", func(r googletest.Request) (int, string) {
		meta, mt, media := multipartParts(t, r)
		check(t, "metadata", meta, map[string]any{"name": "Budget", "mimeType": "application/vnd.google-apps.spreadsheet"})
		check(t, "media type", mt, "text/csv")
		check(t, "media", media, "a,b\n1,2\n")
		return 200, `{"id":"sh1","name":"Budget","mimeType":"application/vnd.google-apps.spreadsheet",
 "webViewLink":"https://docs.google.com/spreadsheets/d/sh1/edit?usp=drivesdk"}`
	})
	m := decode(t, run(t, f.Client(), "drive_create_file", `{"name":"Budget","content":"a,b\n1,2\n","convert_to":"spreadsheet"}`))
	check(t, "type", m["type"], "spreadsheet")
	wantError(t, run(t, f.Client(), "drive_create_file", `{"name":" ","content":"x"}`), tools.CodeInvalidArgument, "name")
	wantError(t, run(t, f.Client(), "drive_create_file", `{"name":"a","content":"x","mime_type":"plain"}`), tools.CodeInvalidArgument, "mime_type")
	wantError(t, run(t, f.Client(), "drive_create_file", `{"name":"a"}`), tools.CodeMissingParameter, "content")
}

func TestCreateFolder(t *testing.T) {
	f := googletest.NewStrictAPI(t, user)
	f.Handle("POST /drive/v3/files", func(r googletest.Request) (int, string) {
		check(t, "body", strings.TrimSpace(r.Body), `{"mimeType":"application/vnd.google-apps.folder","name":"Receipts","parents":["root1"]}`)
		return 200, `{"id":"f9","name":"Receipts","mimeType":"application/vnd.google-apps.folder","parents":["root1"],
 "webViewLink":"https://drive.google.com/drive/folders/f9"}`
	})
	m := decode(t, run(t, f.Client(), "drive_create_folder", `{"name":"Receipts","parent_id":"root1"}`))
	check(t, "file", m, map[string]any{"id": "f9", "name": "Receipts", "type": "folder", "parents": []any{"root1"},
		"link": "https://drive.google.com/drive/folders/f9"})
}

func TestMove(t *testing.T) {
	f := googletest.NewStrictAPI(t, user)
	f.Handle("GET /drive/v3/files/1aBc", func(r googletest.Request) (int, string) {
		check(t, "fields", r.Query.Get("fields"), "parents")
		return 200, `{"parents":["old1","old2"]}`
	})
	f.Handle("PATCH /drive/v3/files/1aBc", func(r googletest.Request) (int, string) {
		check(t, "addParents", r.Query.Get("addParents"), "new1")
		check(t, "removeParents", r.Query.Get("removeParents"), "old1,old2")
		check(t, "body", strings.TrimSpace(r.Body), `{"name":"Plan v2"}`)
		return 200, `{"id":"1aBc","name":"Plan v2","mimeType":"application/vnd.google-apps.document","parents":["new1"]}`
	})
	m := decode(t, run(t, f.Client(), "drive_move", `{"file_id":"1aBc","folder_id":"new1","name":"Plan v2"}`))
	check(t, "name", m["name"], "Plan v2")
	check(t, "parents", m["parents"], []any{"new1"})
	wantError(t, run(t, f.Client(), "drive_move", `{"file_id":"1aBc"}`), tools.CodeMissingParameter, "folder_id")
}

func TestRenameOnly(t *testing.T) {
	f := googletest.NewStrictAPI(t, user)
	f.Handle("PATCH /drive/v3/files/1aBc", func(r googletest.Request) (int, string) {
		check(t, "addParents", r.Query.Get("addParents"), "")
		return 200, `{"id":"1aBc","name":"Renamed","mimeType":"text/plain"}`
	})
	decode(t, run(t, f.Client(), "drive_move", `{"file_id":"1aBc","name":"Renamed"}`))
	check(t, "gets", f.Count("GET /drive/v3/files/1aBc"), 0)
}

func TestShare(t *testing.T) {
	f := googletest.NewStrictAPI(t, user)
	f.Handle("POST /drive/v3/files/1aBc/permissions", func(r googletest.Request) (int, string) {
		var body map[string]any
		json.Unmarshal([]byte(r.Body), &body)
		if body["type"] == "anyone" {
			check(t, "body", body, map[string]any{"type": "anyone", "role": "reader"})
			check(t, "sendNotificationEmail", r.Query.Get("sendNotificationEmail"), "")
			return 200, `{"kind":"drive#permission","id":"anyoneWithLink","type":"anyone","role":"reader"}`
		}
		check(t, "body", body, map[string]any{"type": "user", "role": "writer", "emailAddress": "bo@example.com"})
		check(t, "sendNotificationEmail", r.Query.Get("sendNotificationEmail"), "true")
		check(t, "emailMessage", r.Query.Get("emailMessage"), "For review")
		return 200, `{"kind":"drive#permission","id":"0987","type":"user","role":"writer","emailAddress":"bo@example.com"}`
	})
	m := decode(t, run(t, f.Client(), "drive_share", `{"file_id":"1aBc","role":"writer","email":"bo@example.com","message":"For review"}`))
	check(t, "share", m, map[string]any{"file_id": "1aBc", "permission_id": "0987", "who": "bo@example.com", "role": "writer"})
	m = decode(t, run(t, f.Client(), "drive_share", `{"file_id":"1aBc","role":"reader","anyone_with_link":true}`))
	check(t, "who", m["who"], "anyone with the link")

	wantError(t, run(t, f.Client(), "drive_share", `{"file_id":"1aBc","role":"owner","email":"bo@example.com"}`), tools.CodeInvalidArgument, "role")
	wantError(t, run(t, f.Client(), "drive_share", `{"file_id":"1aBc","role":"reader","email":"bo at example"}`), tools.CodeInvalidArgument, "email")
	wantError(t, run(t, f.Client(), "drive_share", `{"file_id":"1aBc","role":"reader"}`), tools.CodeMissingParameter, "email")
	wantError(t, run(t, f.Client(), "drive_share", `{"file_id":"1aBc","role":"reader","email":"bo@example.com","anyone_with_link":true}`), tools.CodeInvalidArgument, "anyone_with_link")
	check(t, "permission requests", f.Count("POST /drive/v3/files/1aBc/permissions"), 2)
}

func TestTrash(t *testing.T) {
	f := googletest.NewStrictAPI(t, user)
	f.Handle("PATCH /drive/v3/files/1aBc", func(r googletest.Request) (int, string) {
		check(t, "body", strings.TrimSpace(r.Body), `{"trashed":true}`)
		return 200, `{"id":"1aBc","name":"Old plan","trashed":true}`
	})
	m := decode(t, run(t, f.Client(), "drive_trash", `{"file_id":"1aBc"}`))
	check(t, "trash", m, map[string]any{"id": "1aBc", "name": "Old plan", "trashed": true})
}

func TestGoogleErrors(t *testing.T) {
	googletest.CheckErrors(t, user, "PATCH /drive/v3/files/x1", []googletest.ErrorCase{
		{Name: "not found", Status: 404, Reason: "notFound", Code: tools.CodeNotFound, Tries: 1},
		{Name: "forbidden", Status: 403, Reason: "insufficientFilePermissions", Code: tools.CodePermission, Tries: 1},
		{Name: "rate limited", Status: 403, Reason: "userRateLimitExceeded", Code: tools.CodeUnavailable, Tries: 3},
		{Name: "too many requests", Status: 429, Reason: "rateLimitExceeded", Code: tools.CodeUnavailable, Tries: 3},
		{Name: "server error", Status: 500, Reason: "backendError", Code: tools.CodeUnavailable, Tries: 3},
		{Name: "bad request", Status: 400, Reason: "invalid", Code: tools.CodeInvalidArgument, Tries: 1},
	}, func(t *testing.T, c *googletest.Client) tools.Result {
		return run(t, c, "drive_trash", `{"file_id":"x1"}`)
	})
}

func TestRetrySucceedsAfterServerError(t *testing.T) {
	f := googletest.NewStrictAPI(t, user)
	n := 0
	f.Handle("GET /drive/v3/files", func(r googletest.Request) (int, string) {
		n++ // the fake serves one request at a time here: calls are sequential
		if n == 1 {
			return 503, googletest.ErrorBody(503, "backendError", "Backend Error")
		}
		return 200, `{"files":[{"id":"a","name":"A","mimeType":"text/plain"}]}`
	})
	m := decode(t, run(t, f.Client(), "drive_search", `{}`))
	check(t, "files", len(m["files"].([]any)), 1)
	check(t, "tries", f.Count("GET /drive/v3/files"), 2)
}

func TestNotConnected(t *testing.T) {
	f := googletest.NewStrictAPI(t, user)
	c := &googletest.Client{Endpoint: f.URL, Connected: map[string]bool{"telegram:2": true}}
	for _, call := range [][2]string{
		{"drive_search", `{}`},
		{"drive_read", `{"file_id":"a"}`},
		{"drive_create_file", `{"name":"a","content":"b"}`},
		{"drive_share", `{"file_id":"a","role":"reader","email":"a@example.com"}`},
	} {
		wantError(t, run(t, c, call[0], call[1]), tools.CodeNotConnected, "/connect google")
	}
}

// Download gives another group a Drive file's bytes, as the caller.
func TestDownloadForOtherGroups(t *testing.T) {
	f := googletest.NewStrictAPI(t, user)
	f.Handle("GET /drive/v3/files/pdf1", func(r googletest.Request) (int, string) {
		if r.Query.Get("alt") == "media" {
			return 200, "%PDF-1.4 bytes"
		}
		return 200, `{"id":"pdf1","name":"report.pdf","mimeType":"application/pdf","size":"14"}`
	})
	ctx := tools.WithCaller(context.Background(), tools.Caller{UserKey: user})
	name, mimeType, data, err := drive.Download(ctx, f.Client(), "pdf1", 1000)
	if err != nil || name != "report.pdf" || mimeType != "application/pdf" || string(data) != "%PDF-1.4 bytes" {
		t.Fatalf("Download = %q %q %q %v", name, mimeType, data, err)
	}
	if _, _, _, err := drive.Download(ctx, f.Client(), "pdf1", 5); err == nil || !strings.Contains(err.Error(), "larger than 5") {
		t.Errorf("over the cap: %v", err)
	}
	// A file whose size Drive gives is not fetched when it is over the
	// cap; one without a size is, and is cut at the cap.
	f.Handle("GET /drive/v3/files/nosize", func(r googletest.Request) (int, string) {
		if r.Query.Get("alt") == "media" {
			return 200, "%PDF-1.4 bytes"
		}
		return 200, `{"id":"nosize","name":"scan.pdf","mimeType":"application/pdf"}`
	})
	if _, _, _, err := drive.Download(ctx, f.Client(), "nosize", 5); err == nil || !strings.Contains(err.Error(), "larger than 5") {
		t.Errorf("over the cap without a size: %v", err)
	}
	media := map[string]int{}
	for _, r := range f.Requests() {
		if r.Query.Get("alt") == "media" {
			media[r.Path]++
		}
	}
	check(t, "downloads", media, map[string]int{"/drive/v3/files/pdf1": 1, "/drive/v3/files/nosize": 1})
}

func TestUnshare(t *testing.T) {
	f := googletest.NewStrictAPI(t, user)
	f.On("GET /drive/v3/files/d1/permissions", 200, `{"permissions":[
		{"id":"p0","type":"user","role":"owner","emailAddress":"ana@example.com"},
		{"id":"p1","type":"user","role":"writer","emailAddress":"Bea@Example.com"},
		{"id":"p2","type":"anyone","role":"reader"}]}`)
	f.On("DELETE /drive/v3/files/d1/permissions/p1", 204, ``)
	f.On("DELETE /drive/v3/files/d1/permissions/p2", 204, ``)
	check(t, "by email", decode(t, run(t, f.Client(), "drive_unshare", `{"file_id":"d1","email":"bea@example.com"}`))["removed"], 1)
	check(t, "by link", decode(t, run(t, f.Client(), "drive_unshare", `{"file_id":"d1","anyone_with_link":true}`))["removed"], 1)
	check(t, "deletes", []int{f.Count("DELETE /drive/v3/files/d1/permissions/p1"), f.Count("DELETE /drive/v3/files/d1/permissions/p2")}, []int{1, 1})
	wantError(t, run(t, f.Client(), "drive_unshare", `{"file_id":"d1","email":"ana@example.com"}`), tools.CodeNotFound, "owners cannot be removed")
	wantError(t, run(t, f.Client(), "drive_unshare", `{"file_id":"d1"}`), tools.CodeMissingParameter, "email")
}

func TestExport(t *testing.T) {
	f := googletest.NewStrictAPI(t, user)
	f.On("GET /drive/v3/files/doc1", 200, `{"id":"doc1","name":"Plan / Q3","mimeType":"application/vnd.google-apps.document"}`)
	f.On("GET /drive/v3/files/pic", 200, `{"id":"pic","name":"cat.png","mimeType":"image/png"}`)
	f.Handle("GET /drive/v3/files/doc1/export", func(r googletest.Request) (int, string) {
		if r.Query.Get("mimeType") == "application/pdf" {
			return 200, "%PDF-1.4 fake"
		}
		check(t, "export mime", r.Query.Get("mimeType"), "text/markdown")
		return 200, "# Plan\n\nShip it."
	})
	out := decode(t, run(t, f.Client(), "drive_export", `{"file_id":"doc1","format":"markdown"}`))
	check(t, "markdown", out["content"], "# Plan\n\nShip it.")

	var saved []string
	dg := drive.New(f.Client(), drive.Options{Save: func(ctx context.Context, name string, data []byte) (string, error) {
		saved = append(saved, name+"="+string(data)+"@"+tools.CallerFrom(ctx).ChatKey)
		return name, nil
	}})
	out = decode(t, googletest.Call(t, dg, user, "drive_export", `{"file_id":"doc1","format":"pdf"}`))
	check(t, "saved", saved, []string{"Plan _ Q3.pdf=%PDF-1.4 fake@" + user})
	check(t, "file", out["file"], "Plan _ Q3.pdf")

	wantError(t, run(t, f.Client(), "drive_export", `{"file_id":"doc1","format":"pdf"}`), "not_available", "text, markdown and csv")
	wantError(t, run(t, f.Client(), "drive_export", `{"file_id":"doc1","format":"csv"}`), tools.CodeInvalidArgument, "docx, markdown, pdf, text")
	wantError(t, run(t, f.Client(), "drive_export", `{"file_id":"pic","format":"pdf"}`), tools.CodeInvalidArgument, "only Google Docs, Sheets and Slides")
}

// TEST (finding: a move into a shared folder grants access unasked):
// drive_move into a folder shared with others is destructive and its
// summary names who gets access; into an unshared folder it is mutating;
// the destination's sharing is read once for the effect and the summary
// together.
func TestMoveIntoASharedFolderAsksAndSaysWho(t *testing.T) {
	f := googletest.NewStrictAPI(t, user)
	f.Handle("GET /drive/v3/files/team/permissions", func(r googletest.Request) (int, string) {
		return 200, `{"permissions":[{"type":"user","role":"owner","emailAddress":"ana@example.com"},
			{"type":"user","role":"writer","emailAddress":"bea@example.com"},{"type":"anyone","role":"reader"}]}`
	})
	f.Handle("GET /drive/v3/files/mine/permissions", func(r googletest.Request) (int, string) {
		return 200, `{"permissions":[{"type":"user","role":"owner","emailAddress":"ana@example.com"}]}`
	})
	g := drive.New(f.Client(), drive.Options{Backoff: googletest.Backoff})
	reg := tools.NewRegistry()
	if err := reg.AddGroup(g.Group, g.Tools...); err != nil {
		t.Fatal(err)
	}
	x := tools.NewExecutor(reg, nil)
	var effect tools.Effect
	var summary string
	// The gate asks what the engine's does: the effect, then the summary.
	x.SetGate(func(ctx context.Context, d tools.Definition, c tools.Call, in tools.Input) (tools.Result, bool, func(tools.Result)) {
		effect, summary = tools.EffectOf(ctx, d, in.Value), tools.Summary(ctx, d, in)
		return tools.Result{Status: tools.StatusPending, Content: summary}, true, nil
	})
	ctx := tools.WithCaller(context.Background(), tools.Caller{ChatKey: user, UserKey: user})
	move := func(folder string) {
		x.Run(ctx, nil, []tools.Call{{ID: "c1", Name: "drive_move", Arguments: fmt.Sprintf(`{"file_id":"1aBc","folder_id":%q}`, folder)}})
	}
	move("team")
	if effect != tools.EffectDestructive || !strings.Contains(summary, "bea@example.com") || !strings.Contains(summary, "anyone with the link") {
		t.Fatalf("into a shared folder: %v, %q", effect, summary)
	}
	if n := f.Count("GET /drive/v3/files/team/permissions"); n != 1 {
		t.Fatalf("the sharing was read %d times for one call", n)
	}
	move("mine")
	if effect != tools.EffectMutate || !strings.Contains(summary, "not shared") {
		t.Fatalf("into an unshared folder: %v, %q", effect, summary)
	}
}
