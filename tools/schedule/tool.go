package schedule

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"

	"loadout/tools"
)

// Group is the scheduled_tasks group.
func Group() tools.Group {
	return tools.Group{Name: "scheduled_tasks", DisplayName: "Scheduled tasks",
		Description: "Run a prompt later or repeatedly"}
}

type input struct {
	Action   string `json:"action" enum:"schedule,list,run_now,update,delete"`
	ID       int64  `json:"id,omitempty" desc:"the task, for run_now, update, delete"`
	Prompt   string `json:"prompt,omitempty" desc:"what to do when it runs"`
	At       string `json:"at,omitempty" desc:"once, at this RFC 3339 time"`
	Every    string `json:"every,omitempty" desc:"or repeat, e.g. 2h"`
	Cron     string `json:"cron,omitempty" desc:"or a cron expression, e.g. 0 8 * * 1-5"`
	TimeZone string `json:"time_zone,omitempty" desc:"IANA zone for cron; default the person's"`
}

type shown struct {
	ID          int64  `json:"id"`
	Owner       string `json:"owner"`
	Prompt      string `json:"prompt"`
	Schedule    string `json:"schedule"`
	TimeZone    string `json:"time_zone"`
	NextRun     string `json:"next_run,omitempty"`
	LastRun     string `json:"last_run,omitempty"`
	LastOutcome string `json:"last_outcome,omitempty"`
}

// Tool is scheduled_tasks.
func (s *Scheduler) Tool() tools.Tool {
	return tools.New(tools.Definition{
		Name:        "scheduled_tasks",
		Examples:    []string{"remind me later to do something", "run a prompt every day at a time", "every week send me a summary", "list or stop my reminders", "every morning give me the news", "remind me tomorrow at 9 to call the bank", "in 20 minutes tell me to take the pizza out", "set a recurring reminder each Monday", "which reminders are set", "cancel the daily summary job", "ping me at 5pm about the report", "run the weekly digest now", "set an alarm for 7am", "remind me next Friday to pay the rent", "every day at noon check the news for me", "my recurring jobs", "at 6pm nudge me about dinner", "do this again every hour", "don't remind me anymore", "remind me in an hour to stretch", "each weekday at 8 send me the weather"},
		Description: "Schedule a prompt to run later in this chat; list, run now, update or delete tasks (a person's own, or anyone's for an admin).",
		Timeout:     30 * time.Second,
		Summarize:   tools.By(summary),
	}, func(ctx context.Context, in input) (any, error) {
		c := tools.CallerFrom(ctx)
		if c.ChatKey == "" {
			return nil, fmt.Errorf("scheduled_tasks: no chat in the context")
		}
		now := s.cfg.Now()
		switch in.Action {
		case "schedule":
			if strings.TrimSpace(in.Prompt) == "" {
				return nil, tools.MissingParameter("scheduled_tasks", "schedule", "prompt")
			}
			have, err := s.store.ChatTasks(ctx, c.ChatKey)
			if err != nil {
				return nil, err
			}
			if len(have) >= s.cfg.MaxTasks {
				return nil, &tools.Error{Code: "full", Message: fmt.Sprintf("This chat has %d tasks, the most allowed (scheduler.max_tasks).", len(have)),
					Suggestion: "Delete tasks that are no longer needed."}
			}
			t := Task{ChatKey: c.ChatKey, UserKey: c.UserKey, Prompt: strings.TrimSpace(in.Prompt), CreatedAt: now}
			if err := s.when(&t, in, now); err != nil {
				return nil, err
			}
			t, err = s.store.CreateTask(ctx, t)
			if err != nil {
				return nil, err
			}
			return s.show(t), nil
		case "list":
			ts, err := s.store.ChatTasks(ctx, c.ChatKey)
			if err != nil {
				return nil, err
			}
			out := []shown{}
			for _, t := range ts {
				out = append(out, s.show(t))
			}
			return map[string]any{"tasks": out}, nil
		case "run_now", "update", "delete":
			if in.ID <= 0 {
				return nil, tools.MissingParameter("scheduled_tasks", in.Action, "id")
			}
			t, err := s.find(ctx, c.ChatKey, in.ID)
			if err != nil {
				return nil, err
			}
			// A task runs as its owner: only they (or an admin) may
			// change what it does, run it or delete it.
			if err := s.cfg.Admins.Permit(ctx, t.UserKey, fmt.Sprintf("Task %d", t.ID)); err != nil {
				return nil, err
			}
			switch in.Action {
			case "delete":
				if _, err := s.store.DeleteTask(ctx, c.ChatKey, in.ID); err != nil {
					return nil, err
				}
				return map[string]any{"status": "deleted", "id": in.ID}, nil
			case "run_now":
				t.NextRun = now
				if _, err := s.store.UpdateTask(ctx, t); err != nil {
					return nil, err
				}
				s.RunDue(ctx)
				t, err = s.find(ctx, c.ChatKey, in.ID)
				if err != nil {
					return map[string]any{"status": "ran", "id": in.ID}, nil
				}
				return s.show(t), nil
			}
			if p := strings.TrimSpace(in.Prompt); p != "" {
				t.Prompt = p
			}
			if in.At != "" || in.Every != "" || in.Cron != "" || in.TimeZone != "" {
				if in.At == "" && in.Every == "" && in.Cron == "" {
					in.At, in.Every, in.Cron = atOf(t), everyOf(t), t.Cron
				}
				if err := s.when(&t, in, now); err != nil {
					return nil, err
				}
			}
			if _, err := s.store.UpdateTask(ctx, t); err != nil {
				return nil, err
			}
			return s.show(t), nil
		}
		return nil, tools.UnknownAction("scheduled_tasks", in.Action, "schedule", "list", "run_now", "update", "delete")
	})
}

func atOf(t Task) string {
	if t.Kind == Once {
		return t.At.Format(time.RFC3339)
	}
	return ""
}

func everyOf(t Task) string {
	if t.Kind == Every {
		return t.Interval.String()
	}
	return ""
}

func (s *Scheduler) find(ctx context.Context, chatKey string, id int64) (Task, error) {
	ts, err := s.store.ChatTasks(ctx, chatKey)
	if err != nil {
		return Task{}, err
	}
	for _, t := range ts {
		if t.ID == id {
			return t, nil
		}
	}
	return Task{}, &tools.Error{Code: tools.CodeNotFound, Message: fmt.Sprintf("This chat has no task %d.", id),
		Suggestion: "List the tasks to see their ids."}
}

// when sets t's schedule from exactly one of at, every and cron.
func (s *Scheduler) when(t *Task, in input, now time.Time) error {
	set := 0
	for _, v := range []string{in.At, in.Every, in.Cron} {
		if strings.TrimSpace(v) != "" {
			set++
		}
	}
	if set != 1 {
		return &tools.Error{Code: tools.CodeInvalidArgument, Message: "Give exactly one of at, every and cron.",
			Suggestion: "at for one time (RFC 3339), every for an interval (e.g. 24h), cron for a calendar schedule (e.g. 0 8 * * 1-5)."}
	}
	t.TimeZone = firstNonEmpty(strings.TrimSpace(in.TimeZone), t.TimeZone, s.cfg.TimeZone)
	loc, err := time.LoadLocation(t.TimeZone)
	if err != nil || strings.EqualFold(t.TimeZone, "local") {
		return &tools.Error{Code: tools.CodeInvalidArgument, Message: fmt.Sprintf("'%s' is not an IANA time zone.", t.TimeZone),
			Suggestion: "Use a name like Europe/Lisbon or America/New_York."}
	}
	t.At, t.Interval, t.Cron = time.Time{}, 0, ""
	switch {
	case in.At != "":
		at, err := time.Parse(time.RFC3339, strings.TrimSpace(in.At))
		if err != nil {
			return &tools.Error{Code: tools.CodeInvalidArgument, Message: fmt.Sprintf("'%s' is not an RFC 3339 time.", in.At),
				Suggestion: "Write it like 2026-05-01T08:00:00+01:00, in the person's zone."}
		}
		if !at.After(now) {
			return &tools.Error{Code: tools.CodeInvalidArgument, Message: fmt.Sprintf("%s is in the past (it is now %s).", at.Format(time.RFC3339), now.In(loc).Format(time.RFC3339))}
		}
		t.Kind, t.At = Once, at
	case in.Every != "":
		d, err := time.ParseDuration(strings.TrimSpace(in.Every))
		if err != nil {
			return &tools.Error{Code: tools.CodeInvalidArgument, Message: fmt.Sprintf("'%s' is not an interval.", in.Every), Suggestion: "Write it like 30m, 2h or 24h."}
		}
		if d < s.cfg.MinInterval {
			return &tools.Error{Code: tools.CodeInvalidArgument, Message: fmt.Sprintf("Tasks may run at most every %s (scheduler.min_interval).", s.cfg.MinInterval)}
		}
		t.Kind, t.Interval = Every, d
	default:
		sched, err := cron.ParseStandard(strings.TrimSpace(in.Cron))
		if err != nil {
			return &tools.Error{Code: tools.CodeInvalidArgument, Message: fmt.Sprintf("'%s' is not a cron expression: %v.", in.Cron, err),
				Suggestion: "Five fields: minute hour day-of-month month day-of-week, e.g. 0 8 * * 1-5."}
		}
		a := sched.Next(now.In(loc))
		if b := sched.Next(a); b.Sub(a) < s.cfg.MinInterval {
			return &tools.Error{Code: tools.CodeInvalidArgument, Message: fmt.Sprintf("Tasks may run at most every %s (scheduler.min_interval).", s.cfg.MinInterval)}
		}
		t.Kind, t.Cron = Cron, strings.TrimSpace(in.Cron)
	}
	next, err := s.first(*t, now)
	if err != nil {
		return err
	}
	t.NextRun = next
	return nil
}

func firstNonEmpty(v ...string) string {
	for _, s := range v {
		if s != "" {
			return s
		}
	}
	return ""
}

func (s *Scheduler) show(t Task) shown {
	loc, err := time.LoadLocation(t.TimeZone)
	if err != nil {
		loc = time.UTC
	}
	out := shown{ID: t.ID, Owner: t.UserKey, Prompt: t.Prompt, TimeZone: loc.String(), LastOutcome: t.LastOutcome}
	switch t.Kind {
	case Once:
		out.Schedule = "once at " + t.At.In(loc).Format(time.RFC3339)
	case Every:
		out.Schedule = "every " + t.Interval.String()
	case Cron:
		out.Schedule = "cron " + t.Cron
	}
	if !t.NextRun.IsZero() {
		out.NextRun = t.NextRun.In(loc).Format(time.RFC3339)
	}
	if !t.LastRun.IsZero() {
		out.LastRun = t.LastRun.In(loc).Format(time.RFC3339)
	}
	return out
}

// Register adds the scheduled_tasks group.
func (s *Scheduler) Register(reg *tools.Registry) error { return reg.AddGroup(Group(), s.Tool()) }

// summary is what a person approves: the prompt a task will run
// unattended is shown whole (tools.Whole), with when it runs.
func summary(_ context.Context, in input) string {
	var when []string
	for _, w := range []struct{ label, v string }{{"at ", in.At}, {"every ", in.Every}, {"on cron ", in.Cron}, {"time zone ", in.TimeZone}} {
		if strings.TrimSpace(w.v) != "" {
			when = append(when, w.label+strings.TrimSpace(w.v))
		}
	}
	schedule := ""
	if len(when) > 0 {
		schedule = " (" + strings.Join(when, ", ") + ")"
	}
	prompt := ""
	if strings.TrimSpace(in.Prompt) != "" {
		prompt = " to run unattended: " + tools.Whole(in.Prompt)
	}
	switch in.Action {
	case "schedule":
		return "Schedule a task in this chat" + schedule + prompt
	case "update":
		return fmt.Sprintf("Change task %d%s%s", in.ID, schedule, prompt)
	case "run_now":
		return fmt.Sprintf("Run task %d now", in.ID)
	case "delete":
		return fmt.Sprintf("Delete task %d", in.ID)
	}
	return "List the scheduled tasks"
}
