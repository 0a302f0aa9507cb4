// Package contacts is the google_contacts tool group: the calling
// person's Google Contacts, through the People API.
package contacts

import (
	"context"
	"fmt"
	"strings"

	"google.golang.org/api/people/v1"

	"loadout/backoff"
	"loadout/google"
	"loadout/tools"
)

// GroupName is the group's name for load_tool_group.
const GroupName = "google_contacts"

// Service is the People API as the group asks google.Client for it.
func Service() google.Service {
	return google.Service{Group: GroupName, Path: "people/", Scopes: []string{people.ContactsScope}}
}

// Options tunes the group. The zero value is the default.
type Options struct {
	// Backoff retries temporary Google errors.
	Backoff backoff.Policy
}

// personFields are the fields tools read and return.
const personFields = "names,emailAddresses,phoneNumbers,organizations,biographies,memberships,metadata"

// New returns the google_contacts group, its tools and scopes, acting as
// the calling person through c.
func New(c google.Client, o Options) google.Group {
	g := &group{api: google.API[people.Service]{Client: c, Service: Service(), New: people.NewService, Backoff: o.Backoff}}
	return google.Group{Examples: examples,
		Group: tools.Group{Name: GroupName, DisplayName: "Google Contacts",
			Description: "The person's Google Contacts: find, list, read, add, change and delete contacts; contact groups."},
		Tools: []tools.Tool{
			tools.New(tools.Definition{Name: "contacts_search", Description: "Find contacts by name, email address or phone number.", ReadOnly: true, Untrusted: true}, g.search),
			tools.New(tools.Definition{Name: "contacts_list", Description: "List the person's contacts by name, a page at a time.", ReadOnly: true, Untrusted: true}, g.list),
			tools.New(tools.Definition{Name: "contacts_get", Description: "One contact in full by its resource name (people/c…).", ReadOnly: true, Untrusted: true}, g.get),
			tools.New(tools.Definition{Name: "contacts_create", Description: "Add a contact with name, email addresses, phone numbers, organization and notes."}, g.create),
			tools.New(tools.Definition{Name: "contacts_update", Description: "Change a contact: the fields given replace the old ones; others stay."}, g.update),
			tools.New(tools.Definition{Name: "contacts_delete", Description: "Delete a contact.", Effect: tools.EffectDestructive,
				Summarize: tools.By(func(_ context.Context, in refIn) string {
					return "Delete the contact " + in.ResourceName
				})}, g.delete),
			tools.New(tools.Definition{Name: "contacts_groups", Description: "List the contact groups (labels) with their member counts.", ReadOnly: true, Untrusted: true}, g.groups),
		},
		Scopes: Service().Scopes,
	}
}

type group struct {
	api google.API[people.Service]
}

// contact is a contact as tools return it.
type contact struct {
	ResourceName string   `json:"resource_name"`
	Name         string   `json:"name,omitempty"`
	Emails       []string `json:"emails,omitempty" reach:"-"`
	Phones       []string `json:"phones,omitempty"`
	Organization string   `json:"organization,omitempty"`
	Title        string   `json:"title,omitempty"`
	Notes        string   `json:"notes,omitempty"`
	Groups       []string `json:"groups,omitempty"`
}

func toContact(p *people.Person) contact {
	c := contact{ResourceName: p.ResourceName}
	if len(p.Names) > 0 {
		c.Name = p.Names[0].DisplayName
	}
	for _, e := range p.EmailAddresses {
		c.Emails = append(c.Emails, e.Value)
	}
	for _, ph := range p.PhoneNumbers {
		c.Phones = append(c.Phones, ph.Value)
	}
	if len(p.Organizations) > 0 {
		c.Organization, c.Title = p.Organizations[0].Name, p.Organizations[0].Title
	}
	if len(p.Biographies) > 0 {
		c.Notes = p.Biographies[0].Value
	}
	for _, m := range p.Memberships {
		if m.ContactGroupMembership != nil && m.ContactGroupMembership.ContactGroupResourceName != "contactGroups/myContacts" {
			c.Groups = append(c.Groups, m.ContactGroupMembership.ContactGroupResourceName)
		}
	}
	return c
}

func what(name string) string { return fmt.Sprintf("the contact '%s'", name) }

// checkName refuses a resource name that is not a contact's, so a call
// cannot reach another People resource.
func checkName(name string) error {
	if err := google.Required("resource_name", name); err != nil {
		return err
	}
	if !strings.HasPrefix(name, "people/") || strings.ContainsAny(name[len("people/"):], "/?#:") {
		return google.Invalid("resource_name", "must be a contact's resource name like people/c123 (from contacts_search or contacts_list)")
	}
	return nil
}

type searchIn struct {
	Query string `json:"query" desc:"name, email or phone, or their start"`
	Limit int    `json:"limit,omitempty" desc:"default 10, at most 30"`
}

func (g *group) search(ctx context.Context, in searchIn) (any, error) {
	if err := google.Required("query", in.Query); err != nil {
		return nil, err
	}
	limit := in.Limit
	if limit <= 0 {
		limit = 10
	}
	limit = min(limit, 30)
	res, err := google.Do(ctx, g.api, "the contacts", func(s *people.Service) (*people.SearchResponse, error) {
		return s.People.SearchContacts().Query(strings.TrimSpace(in.Query)).ReadMask(personFields).PageSize(int64(limit)).Context(ctx).Do()
	})
	if err != nil {
		return nil, err
	}
	out := []contact{}
	for _, r := range res.Results {
		if r.Person != nil {
			out = append(out, toContact(r.Person))
		}
	}
	return map[string]any{"contacts": out}, nil
}

type listIn struct {
	PageSize  int    `json:"page_size,omitempty" desc:"default 50, at most 200"`
	PageToken string `json:"page_token,omitempty"`
}

func (g *group) list(ctx context.Context, in listIn) (any, error) {
	size := in.PageSize
	if size <= 0 {
		size = 50
	}
	size = min(size, 200)
	res, err := google.Do(ctx, g.api, "the contacts", func(s *people.Service) (*people.ListConnectionsResponse, error) {
		c := s.People.Connections.List("people/me").PersonFields(personFields).PageSize(int64(size)).
			SortOrder("FIRST_NAME_ASCENDING").Context(ctx)
		if in.PageToken != "" {
			c = c.PageToken(in.PageToken)
		}
		return c.Do()
	})
	if err != nil {
		return nil, err
	}
	out := []contact{}
	for _, p := range res.Connections {
		out = append(out, toContact(p))
	}
	m := map[string]any{"contacts": out, "total": res.TotalPeople}
	if res.NextPageToken != "" {
		m["next_page_token"] = res.NextPageToken
	}
	return m, nil
}

type refIn struct {
	ResourceName string `json:"resource_name" desc:"people/c…"`
}

func (g *group) get(ctx context.Context, in refIn) (any, error) {
	if err := checkName(in.ResourceName); err != nil {
		return nil, err
	}
	p, err := google.Do(ctx, g.api, what(in.ResourceName), func(s *people.Service) (*people.Person, error) {
		return s.People.Get(in.ResourceName).PersonFields(personFields).Context(ctx).Do()
	})
	if err != nil {
		return nil, err
	}
	return toContact(p), nil
}

type fieldsIn struct {
	Name         *string  `json:"name,omitempty" desc:"full name"`
	Emails       []string `json:"emails,omitempty" reach:"-"`
	Phones       []string `json:"phones,omitempty"`
	Organization *string  `json:"organization,omitempty"`
	Title        *string  `json:"title,omitempty" desc:"job title"`
	Notes        *string  `json:"notes,omitempty"`
}

// apply writes the fields given into p and returns their People field
// names, for updatePersonFields.
func (in fieldsIn) apply(p *people.Person) []string {
	var fields []string
	if in.Name != nil {
		p.Names = []*people.Name{{UnstructuredName: strings.TrimSpace(*in.Name)}}
		fields = append(fields, "names")
	}
	if in.Emails != nil {
		p.EmailAddresses = nil
		for _, e := range in.Emails {
			p.EmailAddresses = append(p.EmailAddresses, &people.EmailAddress{Value: strings.TrimSpace(e)})
		}
		fields = append(fields, "emailAddresses")
	}
	if in.Phones != nil {
		p.PhoneNumbers = nil
		for _, ph := range in.Phones {
			p.PhoneNumbers = append(p.PhoneNumbers, &people.PhoneNumber{Value: strings.TrimSpace(ph)})
		}
		fields = append(fields, "phoneNumbers")
	}
	if in.Organization != nil || in.Title != nil {
		org := &people.Organization{}
		if len(p.Organizations) > 0 {
			org = p.Organizations[0]
		}
		if in.Organization != nil {
			org.Name = *in.Organization
		}
		if in.Title != nil {
			org.Title = *in.Title
		}
		p.Organizations = []*people.Organization{org}
		fields = append(fields, "organizations")
	}
	if in.Notes != nil {
		p.Biographies = []*people.Biography{{Value: *in.Notes, ContentType: "TEXT_PLAIN"}}
		fields = append(fields, "biographies")
	}
	return fields
}

func (g *group) create(ctx context.Context, in fieldsIn) (any, error) {
	if in.Name == nil && len(in.Emails) == 0 && len(in.Phones) == 0 {
		return nil, &tools.Error{Code: tools.CodeMissingParameter, Message: "A contact needs at least a name, an email address or a phone number."}
	}
	p := &people.Person{}
	in.apply(p)
	created, err := google.Do(ctx, g.api, "the new contact", func(s *people.Service) (*people.Person, error) {
		return s.People.CreateContact(p).PersonFields(personFields).Context(ctx).Do()
	})
	if err != nil {
		return nil, err
	}
	return map[string]any{"status": "created", "contact": toContact(created)}, nil
}

type updateIn struct {
	ResourceName string   `json:"resource_name" desc:"people/c…"`
	Name         *string  `json:"name,omitempty" desc:"full name"`
	Emails       []string `json:"emails,omitempty" desc:"replace all email addresses" reach:"-"`
	Phones       []string `json:"phones,omitempty" desc:"replace all phone numbers"`
	Organization *string  `json:"organization,omitempty"`
	Title        *string  `json:"title,omitempty" desc:"job title"`
	Notes        *string  `json:"notes,omitempty"`
}

func (g *group) update(ctx context.Context, in updateIn) (any, error) {
	if err := checkName(in.ResourceName); err != nil {
		return nil, err
	}
	svc, err := g.api.Connect(ctx)
	if err != nil {
		return nil, err
	}
	// The update must carry the contact's current etag.
	var p *people.Person
	if err := g.api.Call(ctx, what(in.ResourceName), func() (err error) {
		p, err = svc.People.Get(in.ResourceName).PersonFields(personFields).Context(ctx).Do()
		return err
	}); err != nil {
		return nil, err
	}
	fields := fieldsIn{Name: in.Name, Emails: in.Emails, Phones: in.Phones, Organization: in.Organization, Title: in.Title, Notes: in.Notes}.apply(p)
	if len(fields) == 0 {
		return nil, &tools.Error{Code: tools.CodeMissingParameter, Message: "Nothing to change: give at least one of name, emails, phones, organization, title, notes."}
	}
	var updated *people.Person
	if err := g.api.Call(ctx, what(in.ResourceName), func() (err error) {
		updated, err = svc.People.UpdateContact(in.ResourceName, p).UpdatePersonFields(strings.Join(fields, ",")).
			PersonFields(personFields).Context(ctx).Do()
		return err
	}); err != nil {
		return nil, err
	}
	return map[string]any{"status": "updated", "contact": toContact(updated)}, nil
}

func (g *group) delete(ctx context.Context, in refIn) (any, error) {
	if err := checkName(in.ResourceName); err != nil {
		return nil, err
	}
	_, err := google.Do(ctx, g.api, what(in.ResourceName), func(s *people.Service) (*people.Empty, error) {
		return s.People.DeleteContact(in.ResourceName).Context(ctx).Do()
	})
	if err != nil {
		return nil, err
	}
	return map[string]any{"status": "deleted", "resource_name": in.ResourceName}, nil
}

func (g *group) groups(ctx context.Context, _ struct{}) (any, error) {
	res, err := google.Do(ctx, g.api, "the contact groups", func(s *people.Service) (*people.ListContactGroupsResponse, error) {
		return s.ContactGroups.List().PageSize(200).Context(ctx).Do()
	})
	if err != nil {
		return nil, err
	}
	type groupOut struct {
		ResourceName string `json:"resource_name"`
		Name         string `json:"name"`
		Members      int64  `json:"members"`
		System       bool   `json:"system,omitempty"`
	}
	out := []groupOut{}
	for _, cg := range res.ContactGroups {
		name := cg.FormattedName
		if name == "" {
			name = cg.Name
		}
		out = append(out, groupOut{ResourceName: cg.ResourceName, Name: name, Members: cg.MemberCount, System: cg.GroupType == "SYSTEM_CONTACT_GROUP"})
	}
	return map[string]any{"groups": out}, nil
}
