// Package schedule is the scheduled_tasks group and its scheduler: a
// prompt to run later — once, at an interval, or on a cron schedule, in
// the person's time zone — whose turn runs in the chat that created it
// and is answered there. Tasks and their runs are kept in the store; a
// run is claimed there before it starts, so no task runs twice, not after
// a crash and not with two processes on one database.
package schedule

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/robfig/cron/v3"

	"loadout/tools"
)

// Kinds of schedule.
const (
	Once  = "once"
	Every = "every"
	Cron  = "cron"
)

// Task is one scheduled prompt.
type Task struct {
	ID       int64
	ChatKey  string
	UserKey  string
	Prompt   string
	Kind     string
	At       time.Time     // Once
	Interval time.Duration // Every
	Cron     string        // Cron
	TimeZone string
	// NextRun is when the task is due next; zero once it is done.
	NextRun     time.Time
	LastRun     time.Time
	LastOutcome string
	CreatedAt   time.Time
}

// Store keeps tasks and claims their runs.
type Store interface {
	CreateTask(ctx context.Context, t Task) (Task, error)
	ChatTasks(ctx context.Context, chatKey string) ([]Task, error)
	UpdateTask(ctx context.Context, t Task) (bool, error)
	DeleteTask(ctx context.Context, chatKey string, id int64) (bool, error)
	// DueTasks are the tasks due at or before now.
	DueTasks(ctx context.Context, now time.Time) ([]Task, error)
	// ClaimRun moves the task from due to next, recording a run with
	// outcome, if the task is still due at due; false when another
	// process claimed it first.
	ClaimRun(ctx context.Context, taskID int64, due, next, now time.Time, outcome string) (runID int64, ok bool, err error)
	// FinishRun records a claimed run's outcome.
	FinishRun(ctx context.Context, runID int64, outcome string) error
	// InterruptRuns marks runs claimed but never finished as interrupted
	// and reports how many there were.
	InterruptRuns(ctx context.Context) (int64, error)
}

// Submit hands a task's prompt to its chat's channel as a message with id;
// the channel runs the turn in order with the chat's other messages and
// delivers the answer (once, whatever id is given twice).
type Submit func(ctx context.Context, chatKey, userKey, id, text string) error

// Config configures the scheduler.
type Config struct {
	// TimeZone is the default for new tasks (agent.time_zone); default UTC.
	TimeZone string `yaml:"-"`
	// CatchUp is how late a missed run may still run at start
	// (scheduler.catch_up); default 1h.
	CatchUp time.Duration `yaml:"catch_up"`
	// MaxTasks bounds a chat's tasks (scheduler.max_tasks); default 50.
	MaxTasks int `yaml:"max_tasks"`
	// MinInterval bounds how often a task may run
	// (scheduler.min_interval); default 5m.
	MinInterval time.Duration `yaml:"min_interval"`
	// Tick is how often due tasks are looked for; default 15s.
	// Admins may change, run and delete anyone's tasks (tools.admins);
	// everyone else only their own.
	Admins tools.Admins  `yaml:"-"`
	Tick   time.Duration `yaml:"-"`
	// Chores run when the scheduler starts and then once an hour
	// (pruning the audit trail past tools.audit_days).
	Chores []func(ctx context.Context) `yaml:"-"`
	Now    func() time.Time            `yaml:"-"`
	Logger *slog.Logger                `yaml:"-"`
}

// Scheduler runs due tasks.
type Scheduler struct {
	cfg    Config
	store  Store
	submit Submit
}

// New returns a scheduler.
func New(cfg Config, st Store, submit Submit) *Scheduler {
	if cfg.TimeZone == "" {
		cfg.TimeZone = "UTC"
	}
	if cfg.CatchUp <= 0 {
		cfg.CatchUp = time.Hour
	}
	if cfg.MaxTasks <= 0 {
		cfg.MaxTasks = 50
	}
	if cfg.MinInterval <= 0 {
		cfg.MinInterval = 5 * time.Minute
	}
	if cfg.Tick <= 0 {
		cfg.Tick = 15 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Scheduler{cfg: cfg, store: st, submit: submit}
}

// Run marks runs a crash interrupted, then runs due tasks every Tick
// until ctx ends.
func (s *Scheduler) Run(ctx context.Context) error {
	if n, err := s.store.InterruptRuns(ctx); err != nil {
		if ctx.Err() != nil {
			return nil // stopped as it began
		}
		s.cfg.Logger.Error("scheduler: cannot read unfinished runs", "err", err)
	} else if n > 0 {
		s.cfg.Logger.Warn("scheduler: runs cut by the last stop are recorded as interrupted, not run again", "runs", n)
	}
	t := time.NewTicker(s.cfg.Tick)
	defer t.Stop()
	var choresDone time.Time
	for {
		if now := s.cfg.Now(); now.Sub(choresDone) >= time.Hour {
			for _, c := range s.cfg.Chores {
				c(ctx)
			}
			choresDone = now
		}
		s.RunDue(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// RunDue runs every task due now: one missed by less than CatchUp runs
// once; one missed by more is skipped, and the skip recorded. Once ctx
// ends it starts no more, and what the stop cut is not logged as a
// failure: a run claimed but not finished is recorded as interrupted by
// the next start.
func (s *Scheduler) RunDue(ctx context.Context) {
	now := s.cfg.Now()
	due, err := s.store.DueTasks(ctx, now)
	if err != nil {
		s.failed(ctx, "scheduler: cannot read due tasks", "err", err)
		return
	}
	for _, t := range due {
		if ctx.Err() != nil {
			return
		}
		next, err := s.after(t, now)
		if err != nil {
			s.cfg.Logger.Error("scheduler: a task's schedule cannot be read; it stops", "task", t.ID, "err", err)
		}
		if late := now.Sub(t.NextRun); late > s.cfg.CatchUp {
			if _, _, err := s.store.ClaimRun(ctx, t.ID, t.NextRun, next, now,
				fmt.Sprintf("skipped: missed by %s while loadout was not running", late.Round(time.Minute))); err != nil {
				s.failed(ctx, "scheduler: cannot record a skipped run", "task", t.ID, "err", err)
			}
			continue
		}
		run, ok, err := s.store.ClaimRun(ctx, t.ID, t.NextRun, next, now, "started")
		if err != nil || !ok {
			if err != nil {
				s.failed(ctx, "scheduler: cannot claim a run", "task", t.ID, "err", err)
			}
			continue // another process has it
		}
		// The run's event id: the same run submitted again is recognised.
		id := fmt.Sprintf("task:%d:%d", t.ID, t.NextRun.Unix())
		text := fmt.Sprintf("[Scheduled task %d, run unattended: what needs approval is asked in this chat] %s", t.ID, t.Prompt)
		outcome := "delivered to the chat"
		if err := s.submit(ctx, t.ChatKey, t.UserKey, id, text); err != nil {
			outcome = "failed: " + err.Error()
			s.failed(ctx, "scheduler: the task's chat did not take it", "task", t.ID, "chat", t.ChatKey, "err", err)
		}
		if err := s.store.FinishRun(ctx, run, outcome); err != nil {
			s.failed(ctx, "scheduler: cannot record a run's outcome", "task", t.ID, "err", err)
		}
	}
}

// failed logs an error, unless ctx has ended: then the error is the
// stop's doing.
func (s *Scheduler) failed(ctx context.Context, msg string, args ...any) {
	if ctx.Err() == nil {
		s.cfg.Logger.Error(msg, args...)
	}
}

// after is when t is due next after now; zero when it is done.
func (s *Scheduler) after(t Task, now time.Time) (time.Time, error) {
	switch t.Kind {
	case Every:
		next := t.NextRun
		for !next.After(now) {
			next = next.Add(t.Interval)
		}
		return next, nil
	case Cron:
		loc, err := time.LoadLocation(t.TimeZone)
		if err != nil {
			return time.Time{}, err
		}
		sched, err := cron.ParseStandard(t.Cron)
		if err != nil {
			return time.Time{}, err
		}
		return sched.Next(now.In(loc)).UTC(), nil
	}
	return time.Time{}, nil
}

// first is when a new or changed task is first due.
func (s *Scheduler) first(t Task, now time.Time) (time.Time, error) {
	switch t.Kind {
	case Once:
		return t.At.UTC(), nil
	case Every:
		return now.Add(t.Interval).UTC(), nil
	}
	return s.after(t, now)
}

// Pause stops a task from running until Resume: it stays, with its
// schedule, not due. The caller checks the owner rules (only the task's
// owner or an admin).
func (s *Scheduler) Pause(ctx context.Context, t Task) error {
	t.NextRun = time.Time{}
	_, err := s.store.UpdateTask(ctx, t)
	return err
}

// Resume makes a paused task due again, as if its schedule were set now.
func (s *Scheduler) Resume(ctx context.Context, t Task) error {
	next, err := s.first(t, s.cfg.Now())
	if err != nil {
		return err
	}
	t.NextRun = next
	_, err = s.store.UpdateTask(ctx, t)
	return err
}

// RunNow runs a task now, as the tool's run_now does: once, then on its
// schedule.
func (s *Scheduler) RunNow(ctx context.Context, t Task) error {
	t.NextRun = s.cfg.Now()
	if _, err := s.store.UpdateTask(ctx, t); err != nil {
		return err
	}
	s.RunDue(ctx)
	return nil
}

// Delete deletes a task and its runs.
func (s *Scheduler) Delete(ctx context.Context, t Task) error {
	_, err := s.store.DeleteTask(ctx, t.ChatKey, t.ID)
	return err
}
