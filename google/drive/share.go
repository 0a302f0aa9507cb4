package drive

import (
	"context"
	"fmt"
	"net/mail"
	"strings"

	gdrive "google.golang.org/api/drive/v3"

	"loadout/google"
	"loadout/tools"
)

type shareIn struct {
	FileID         string `json:"file_id" desc:"Drive file or folder id"`
	Role           string `json:"role" enum:"reader,commenter,writer"`
	Email          string `json:"email,omitempty" desc:"person or group to share with" reach:"recipients"`
	AnyoneWithLink bool   `json:"anyone_with_link,omitempty" desc:"share with anyone who has the link instead of an email"`
	Notify         *bool  `json:"notify,omitempty" desc:"email the person; default true"`
	Message        string `json:"message,omitempty" desc:"note in the notification email"`
}

type shareOut struct {
	FileID       string `json:"file_id"`
	PermissionID string `json:"permission_id"`
	Who          string `json:"who"`
	Role         string `json:"role"`
}

func (g *group) share(ctx context.Context, in shareIn) (any, error) {
	id := strings.TrimSpace(in.FileID)
	if id == "" {
		return nil, google.Invalid("file_id", "is empty")
	}
	switch in.Role {
	case "reader", "commenter", "writer":
	default:
		return nil, google.Invalid("role", "must be reader, commenter or writer")
	}
	email := strings.TrimSpace(in.Email)
	perm := &gdrive.Permission{Role: in.Role}
	switch {
	case email != "" && in.AnyoneWithLink:
		return nil, google.Invalid("email", "cannot be combined with anyone_with_link")
	case email != "":
		a, err := mail.ParseAddress(email)
		if err != nil || a.Address != email {
			return nil, google.Invalid("email", fmt.Sprintf("'%s' is not an email address", email))
		}
		perm.Type, perm.EmailAddress = "user", email
	case in.AnyoneWithLink:
		perm.Type = "anyone"
	default:
		return nil, &tools.Error{Code: tools.CodeMissingParameter, Message: "Give email or anyone_with_link.",
			Suggestion: "Call drive_share again with the person's email address."}
	}
	svc, err := g.api.Connect(ctx)
	if err != nil {
		return nil, err
	}
	var p *gdrive.Permission
	err = g.api.Call(ctx, fileWhat(id), func() error {
		c := svc.Permissions.Create(id, perm).Context(ctx).SupportsAllDrives(true).Fields("id,type,role,emailAddress")
		if perm.Type == "user" {
			notify := in.Notify == nil || *in.Notify
			c.SendNotificationEmail(notify)
			if notify && in.Message != "" {
				c.EmailMessage(in.Message)
			}
		}
		p, err = c.Do()
		return err
	})
	if err != nil {
		return nil, err
	}
	return shareOut{FileID: id, PermissionID: p.Id, Who: audience(p.EmailAddress, p.Type == "anyone"), Role: p.Role}, nil
}

// audience names whom a share reaches: anyone with the link, or email.
func audience(email string, anyone bool) string {
	if anyone {
		return "anyone with the link"
	}
	return email
}

type unshareIn struct {
	FileID         string `json:"file_id" desc:"Drive file or folder id"`
	Email          string `json:"email,omitempty" desc:"the person or group to take access from" reach:"recipients"`
	AnyoneWithLink bool   `json:"anyone_with_link,omitempty" desc:"stop sharing with anyone who has the link"`
}

func (g *group) unshare(ctx context.Context, in unshareIn) (any, error) {
	id := strings.TrimSpace(in.FileID)
	email := strings.ToLower(strings.TrimSpace(in.Email))
	switch {
	case id == "":
		return nil, google.Invalid("file_id", "is empty")
	case email != "" && in.AnyoneWithLink:
		return nil, google.Invalid("email", "cannot be combined with anyone_with_link")
	case email == "" && !in.AnyoneWithLink:
		return nil, &tools.Error{Code: tools.CodeMissingParameter, Message: "Give email or anyone_with_link."}
	}
	svc, err := g.api.Connect(ctx)
	if err != nil {
		return nil, err
	}
	var perms *gdrive.PermissionList
	if err := g.api.Call(ctx, fileWhat(id), func() (err error) {
		perms, err = svc.Permissions.List(id).Context(ctx).SupportsAllDrives(true).Fields("permissions(id,type,role,emailAddress)").Do()
		return err
	}); err != nil {
		return nil, err
	}
	var removed []string
	for _, p := range perms.Permissions {
		match := (in.AnyoneWithLink && p.Type == "anyone") || (email != "" && strings.ToLower(p.EmailAddress) == email)
		if !match || p.Role == "owner" {
			continue
		}
		if err := g.api.Call(ctx, fileWhat(id), func() error {
			return svc.Permissions.Delete(id, p.Id).Context(ctx).SupportsAllDrives(true).Do()
		}); err != nil {
			return nil, err
		}
		removed = append(removed, p.Role)
	}
	if len(removed) == 0 {
		return nil, &tools.Error{Code: tools.CodeNotFound, Message: fmt.Sprintf("The file is not shared with %s (owners cannot be removed).", audience(email, in.AnyoneWithLink)),
			Suggestion: "Check who has access with drive_get."}
	}
	return map[string]any{"status": "unshared", "file_id": id, "removed": len(removed)}, nil
}
