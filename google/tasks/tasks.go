// Package tasks is the google_tasks tool group: the calling person's
// Google Tasks lists and tasks.
package tasks

import (
	"context"
	"fmt"
	"strings"
	"time"

	gtasks "google.golang.org/api/tasks/v1"

	"loadout/backoff"
	"loadout/google"
	"loadout/tools"
)

// GroupName is the group's name for load_tool_group.
const GroupName = "google_tasks"

// Service is the Tasks API as the group asks google.Client for it (its
// paths start with tasks/v1/).
func Service() google.Service {
	return google.Service{Group: GroupName, Path: "", Scopes: []string{gtasks.TasksScope}}
}

// Options tunes the group. The zero value is the default.
type Options struct {
	// Backoff retries temporary Google errors.
	Backoff backoff.Policy
}

// New returns the google_tasks group, its tools and scopes, acting as the
// calling person through c.
func New(c google.Client, o Options) google.Group {
	g := &group{api: google.API[gtasks.Service]{Client: c, Service: Service(), New: gtasks.NewService, Backoff: o.Backoff}}
	return google.Group{Examples: examples,
		Group: tools.Group{Name: GroupName, DisplayName: "Google Tasks",
			Description: "The person's Google Tasks: to-do lists and their tasks, due dates, completing and moving tasks."},
		Tools: []tools.Tool{
			tools.New(tools.Definition{Name: "tasks_lists", Description: "List, create or delete the person's task lists.",
				EffectFor: tools.By(func(_ context.Context, in listsIn) tools.Effect {
					switch in.Action {
					case "list":
						return tools.EffectRead
					case "delete":
						return tools.EffectDestructive
					}
					return tools.EffectMutate
				}),
				Summarize: tools.By(func(_ context.Context, in listsIn) string {
					return "Delete the task list " + in.ListID + " and every task in it"
				})}, g.lists),
			tools.New(tools.Definition{Name: "tasks_list", Description: "List the tasks of a list (default the person's first), optionally by due date and with completed ones.", ReadOnly: true, Untrusted: true}, g.list),
			tools.New(tools.Definition{Name: "tasks_create", Description: "Create a task with optional notes, due date and parent task."}, g.create),
			tools.New(tools.Definition{Name: "tasks_update", Description: "Change a task's title, notes or due date, or mark it done or not done."}, g.update),
			tools.New(tools.Definition{Name: "tasks_move", Description: "Move a task: under a parent task, after another task, or to the top."}, g.move),
			tools.New(tools.Definition{Name: "tasks_delete", Description: "Delete a task.", Effect: tools.EffectDestructive,
				Summarize: tools.By(func(_ context.Context, in taskRef) string {
					if in.ListID == "" {
						return "Delete the task " + in.TaskID + " from the first list"
					}
					return "Delete the task " + in.TaskID + " from the list " + in.ListID
				})}, g.delete),
		},
		Scopes: Service().Scopes,
	}
}

type group struct {
	api google.API[gtasks.Service]
}

// taskList is a list as tools return it.
type taskList struct {
	ID      string `json:"id"`
	Title   string `json:"title"`
	Updated string `json:"updated,omitempty"`
}

// task is a task as tools return it.
type task struct {
	ID        string `json:"id"`
	Title     string `json:"title"`
	Notes     string `json:"notes,omitempty"`
	Due       string `json:"due,omitempty"`
	Done      bool   `json:"done"`
	Completed string `json:"completed,omitempty"`
	Parent    string `json:"parent,omitempty"`
}

func toTask(t *gtasks.Task) task {
	out := task{ID: t.Id, Title: t.Title, Notes: t.Notes, Due: dueDate(t.Due), Done: t.Status == "completed", Parent: t.Parent}
	if t.Completed != nil {
		out.Completed = *t.Completed
	}
	return out
}

// dueDate shows a due time as the date it is: Google Tasks keeps only the
// date (as midnight UTC).
func dueDate(s string) string {
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t.UTC().Format(time.DateOnly)
	}
	return s
}

// parseDue reads a due date (YYYY-MM-DD, or an RFC 3339 time whose date
// is kept) into the form the API takes.
func parseDue(param, s string) (string, error) {
	if s == "" {
		return "", nil
	}
	if t, err := time.Parse(time.DateOnly, s); err == nil {
		return t.Format(time.RFC3339), nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC).Format(time.RFC3339), nil
	}
	return "", google.Invalid(param, "must be a date like 2026-03-14")
}

type listsIn struct {
	Action string `json:"action" enum:"list,create,delete"`
	Title  string `json:"title,omitempty" desc:"for create"`
	ListID string `json:"list_id,omitempty" desc:"for delete"`
}

func (g *group) lists(ctx context.Context, in listsIn) (any, error) {
	switch in.Action {
	case "list":
		res, err := google.Do(ctx, g.api, "the task lists", func(s *gtasks.Service) (*gtasks.TaskLists, error) {
			return s.Tasklists.List().MaxResults(100).Context(ctx).Do()
		})
		if err != nil {
			return nil, err
		}
		out := []taskList{}
		for _, l := range res.Items {
			out = append(out, taskList{ID: l.Id, Title: l.Title, Updated: l.Updated})
		}
		return map[string]any{"lists": out}, nil
	case "create":
		if err := google.Required("title", in.Title); err != nil {
			return nil, err
		}
		l, err := google.Do(ctx, g.api, "the task list", func(s *gtasks.Service) (*gtasks.TaskList, error) {
			return s.Tasklists.Insert(&gtasks.TaskList{Title: strings.TrimSpace(in.Title)}).Context(ctx).Do()
		})
		if err != nil {
			return nil, err
		}
		return map[string]any{"status": "created", "list": taskList{ID: l.Id, Title: l.Title}}, nil
	case "delete":
		if err := google.Required("list_id", in.ListID); err != nil {
			return nil, err
		}
		_, err := google.Do(ctx, g.api, listWhat(in.ListID), func(s *gtasks.Service) (struct{}, error) {
			return struct{}{}, s.Tasklists.Delete(in.ListID).Context(ctx).Do()
		})
		if err != nil {
			return nil, err
		}
		return map[string]any{"status": "deleted", "list_id": in.ListID}, nil
	}
	return nil, tools.UnknownAction("tasks_lists", in.Action, "list", "create", "delete")
}

func listWhat(id string) string { return fmt.Sprintf("the task list '%s'", id) }
func taskWhat(id string) string { return fmt.Sprintf("the task '%s'", id) }

// listOrDefault is the list a call names, or "@default", the person's
// first list.
func listOrDefault(id string) string {
	if id = strings.TrimSpace(id); id != "" {
		return id
	}
	return "@default"
}

type listIn struct {
	ListID        string `json:"list_id,omitempty" desc:"default the person's first list"`
	DueBefore     string `json:"due_before,omitempty" desc:"date, inclusive"`
	DueAfter      string `json:"due_after,omitempty" desc:"date, inclusive"`
	ShowCompleted bool   `json:"show_completed,omitempty"`
	PageToken     string `json:"page_token,omitempty"`
}

func (g *group) list(ctx context.Context, in listIn) (any, error) {
	before, err := parseDue("due_before", in.DueBefore)
	if err != nil {
		return nil, err
	}
	after, err := parseDue("due_after", in.DueAfter)
	if err != nil {
		return nil, err
	}
	list := listOrDefault(in.ListID)
	res, err := google.Do(ctx, g.api, listWhat(list), func(s *gtasks.Service) (*gtasks.Tasks, error) {
		c := s.Tasks.List(list).MaxResults(100).ShowCompleted(in.ShowCompleted).ShowHidden(in.ShowCompleted).Context(ctx)
		if before != "" {
			// dueMax is exclusive; the day asked for is included.
			t, _ := time.Parse(time.RFC3339, before)
			c = c.DueMax(t.Add(24 * time.Hour).Format(time.RFC3339))
		}
		if after != "" {
			c = c.DueMin(after)
		}
		if in.PageToken != "" {
			c = c.PageToken(in.PageToken)
		}
		return c.Do()
	})
	if err != nil {
		return nil, err
	}
	out := []task{}
	for _, t := range res.Items {
		out = append(out, toTask(t))
	}
	m := map[string]any{"tasks": out}
	if res.NextPageToken != "" {
		m["next_page_token"] = res.NextPageToken
	}
	return m, nil
}

type createIn struct {
	ListID string `json:"list_id,omitempty" desc:"default the person's first list"`
	Title  string `json:"title"`
	Notes  string `json:"notes,omitempty"`
	Due    string `json:"due,omitempty" desc:"date, e.g. 2026-03-14"`
	Parent string `json:"parent,omitempty" desc:"make it a subtask of this task id"`
}

func (g *group) create(ctx context.Context, in createIn) (any, error) {
	if err := google.Required("title", in.Title); err != nil {
		return nil, err
	}
	due, err := parseDue("due", in.Due)
	if err != nil {
		return nil, err
	}
	list := listOrDefault(in.ListID)
	t, err := google.Do(ctx, g.api, listWhat(list), func(s *gtasks.Service) (*gtasks.Task, error) {
		c := s.Tasks.Insert(list, &gtasks.Task{Title: strings.TrimSpace(in.Title), Notes: in.Notes, Due: due}).Context(ctx)
		if in.Parent != "" {
			c = c.Parent(in.Parent)
		}
		return c.Do()
	})
	if err != nil {
		return nil, err
	}
	return map[string]any{"status": "created", "task": toTask(t)}, nil
}

type taskRef struct {
	ListID string `json:"list_id,omitempty" desc:"default the person's first list"`
	TaskID string `json:"task_id"`
}

type updateIn struct {
	ListID string  `json:"list_id,omitempty" desc:"default the person's first list"`
	TaskID string  `json:"task_id"`
	Title  *string `json:"title,omitempty"`
	Notes  *string `json:"notes,omitempty"`
	Due    *string `json:"due,omitempty" desc:"date; \"\" removes it"`
	Done   *bool   `json:"done,omitempty" desc:"true completes the task, false reopens it"`
}

func (g *group) update(ctx context.Context, in updateIn) (any, error) {
	if err := google.Required("task_id", in.TaskID); err != nil {
		return nil, err
	}
	patch := &gtasks.Task{}
	if in.Title != nil {
		patch.Title = *in.Title
	}
	if in.Notes != nil {
		patch.Notes = *in.Notes
		if *in.Notes == "" {
			patch.NullFields = append(patch.NullFields, "Notes")
		}
	}
	if in.Due != nil {
		due, err := parseDue("due", *in.Due)
		if err != nil {
			return nil, err
		}
		patch.Due = due
		if due == "" {
			patch.NullFields = append(patch.NullFields, "Due")
		}
	}
	if in.Done != nil {
		patch.Status = "completed"
		if !*in.Done {
			// Reopening a task clears when it was done.
			patch.Status = "needsAction"
			patch.NullFields = append(patch.NullFields, "Completed")
		}
	}
	list := listOrDefault(in.ListID)
	t, err := google.Do(ctx, g.api, taskWhat(in.TaskID), func(s *gtasks.Service) (*gtasks.Task, error) {
		return s.Tasks.Patch(list, in.TaskID, patch).Context(ctx).Do()
	})
	if err != nil {
		return nil, err
	}
	return map[string]any{"status": "updated", "task": toTask(t)}, nil
}

type moveIn struct {
	ListID   string `json:"list_id,omitempty" desc:"default the person's first list"`
	TaskID   string `json:"task_id"`
	Parent   string `json:"parent,omitempty" desc:"new parent task id; omit for the top level"`
	Previous string `json:"previous,omitempty" desc:"place it after this task id; omit for first"`
}

func (g *group) move(ctx context.Context, in moveIn) (any, error) {
	if err := google.Required("task_id", in.TaskID); err != nil {
		return nil, err
	}
	list := listOrDefault(in.ListID)
	t, err := google.Do(ctx, g.api, taskWhat(in.TaskID), func(s *gtasks.Service) (*gtasks.Task, error) {
		c := s.Tasks.Move(list, in.TaskID).Context(ctx)
		if in.Parent != "" {
			c = c.Parent(in.Parent)
		}
		if in.Previous != "" {
			c = c.Previous(in.Previous)
		}
		return c.Do()
	})
	if err != nil {
		return nil, err
	}
	return map[string]any{"status": "moved", "task": toTask(t)}, nil
}

func (g *group) delete(ctx context.Context, in taskRef) (any, error) {
	if err := google.Required("task_id", in.TaskID); err != nil {
		return nil, err
	}
	list := listOrDefault(in.ListID)
	_, err := google.Do(ctx, g.api, taskWhat(in.TaskID), func(s *gtasks.Service) (struct{}, error) {
		return struct{}{}, s.Tasks.Delete(list, in.TaskID).Context(ctx).Do()
	})
	if err != nil {
		return nil, err
	}
	return map[string]any{"status": "deleted", "task_id": in.TaskID}, nil
}
