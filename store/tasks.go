package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"loadout/tools/custom"
	"loadout/tools/schedule"
)

var (
	_ schedule.Store = (*DB)(nil)
	_ custom.Store   = (*DB)(nil)
)

// taskRow is a scheduled task. next_run is NULL once it is done.
type taskRow struct {
	ID          int64  `gorm:"primaryKey"`
	ChatKey     string `gorm:"not null;index"`
	UserKey     string
	Prompt      string `gorm:"not null"`
	Kind        string `gorm:"not null"`
	At          time.Time
	Interval    int64 // seconds
	Cron        string
	TimeZone    string
	NextRun     *time.Time `gorm:"index"`
	LastRun     *time.Time
	LastOutcome string
	CreatedAt   time.Time
}

func (taskRow) TableName() string { return "tasks" }

// taskRun is one claimed run; a task runs at most once per due time.
type taskRun struct {
	ID         int64     `gorm:"primaryKey"`
	TaskID     int64     `gorm:"not null;uniqueIndex:idx_task_runs_due,priority:1"`
	Due        time.Time `gorm:"not null;uniqueIndex:idx_task_runs_due,priority:2"`
	Outcome    string
	StartedAt  time.Time
	FinishedAt *time.Time
}

func utcPtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	u := t.UTC()
	return &u
}

func (r taskRow) task() schedule.Task {
	t := schedule.Task{ID: r.ID, ChatKey: r.ChatKey, UserKey: r.UserKey, Prompt: r.Prompt, Kind: r.Kind, At: r.At.UTC(),
		Interval: time.Duration(r.Interval) * time.Second, Cron: r.Cron, TimeZone: r.TimeZone, LastOutcome: r.LastOutcome, CreatedAt: r.CreatedAt}
	if r.NextRun != nil {
		t.NextRun = r.NextRun.UTC()
	}
	if r.LastRun != nil {
		t.LastRun = r.LastRun.UTC()
	}
	return t
}

func taskRowOf(t schedule.Task) taskRow {
	return taskRow{ID: t.ID, ChatKey: t.ChatKey, UserKey: t.UserKey, Prompt: t.Prompt, Kind: t.Kind, At: t.At.UTC(),
		Interval: int64(t.Interval / time.Second), Cron: t.Cron, TimeZone: t.TimeZone, NextRun: utcPtr(t.NextRun),
		LastRun: utcPtr(t.LastRun), LastOutcome: t.LastOutcome, CreatedAt: t.CreatedAt.UTC()}
}

// CreateTask stores a new task.
func (d *DB) CreateTask(ctx context.Context, t schedule.Task) (schedule.Task, error) {
	row := taskRowOf(t)
	row.ID = 0
	if err := d.db.WithContext(ctx).Create(&row).Error; err != nil {
		return schedule.Task{}, kind(err)
	}
	return row.task(), nil
}

// ChatTasks are a chat's tasks by id.
func (d *DB) ChatTasks(ctx context.Context, chatKey string) ([]schedule.Task, error) {
	var rows []taskRow
	if err := d.db.WithContext(ctx).Where("chat_key = ?", chatKey).Order("id").Find(&rows).Error; err != nil {
		return nil, kind(err)
	}
	out := make([]schedule.Task, len(rows))
	for i, r := range rows {
		out[i] = r.task()
	}
	return out, nil
}

// UpdateTask saves a task's prompt and schedule.
func (d *DB) UpdateTask(ctx context.Context, t schedule.Task) (bool, error) {
	row := taskRowOf(t)
	res := d.db.WithContext(ctx).Model(&taskRow{}).Where("id = ? AND chat_key = ?", t.ID, t.ChatKey).Updates(map[string]any{
		"prompt": row.Prompt, "kind": row.Kind, "at": row.At, "interval": row.Interval, "cron": row.Cron,
		"time_zone": row.TimeZone, "next_run": row.NextRun,
	})
	return res.RowsAffected > 0, kind(res.Error)
}

// DeleteTask deletes a chat's task and its runs.
func (d *DB) DeleteTask(ctx context.Context, chatKey string, id int64) (bool, error) {
	var ok bool
	err := d.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		res := tx.Where("id = ? AND chat_key = ?", id, chatKey).Delete(&taskRow{})
		if res.Error != nil {
			return res.Error
		}
		ok = res.RowsAffected > 0
		return tx.Where("task_id = ?", id).Delete(&taskRun{}).Error
	})
	return ok, kind(err)
}

// DueTasks are the tasks due at or before now, the most overdue first.
func (d *DB) DueTasks(ctx context.Context, now time.Time) ([]schedule.Task, error) {
	var rows []taskRow
	if err := d.db.WithContext(ctx).Where("next_run IS NOT NULL AND next_run <= ?", now.UTC()).Order("next_run").Find(&rows).Error; err != nil {
		return nil, kind(err)
	}
	out := make([]schedule.Task, len(rows))
	for i, r := range rows {
		out[i] = r.task()
	}
	return out, nil
}

// ClaimRun moves a task still due at due on to next and records the run,
// in one transaction; a task another process moved first, or a run
// already recorded for due, is not claimed.
func (d *DB) ClaimRun(ctx context.Context, taskID int64, due, next, now time.Time, outcome string) (int64, bool, error) {
	var runID int64
	var ok bool
	err := d.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		res := tx.Model(&taskRow{}).Where("id = ? AND next_run = ?", taskID, due.UTC()).Updates(map[string]any{
			"next_run": utcPtr(next), "last_run": now.UTC(), "last_outcome": outcome,
		})
		if res.Error != nil || res.RowsAffected == 0 {
			return res.Error
		}
		run := taskRun{TaskID: taskID, Due: due.UTC(), Outcome: outcome, StartedAt: now.UTC()}
		if outcome != "started" {
			run.FinishedAt = utcPtr(now)
		}
		if err := tx.Create(&run).Error; err != nil {
			return err
		}
		runID, ok = run.ID, true
		return nil
	})
	if err != nil {
		return 0, false, kind(err)
	}
	return runID, ok, nil
}

// FinishRun records a run's outcome, on the run and its task.
func (d *DB) FinishRun(ctx context.Context, runID int64, outcome string) error {
	return kind(d.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var run taskRun
		if err := tx.First(&run, runID).Error; err != nil {
			return err
		}
		if err := tx.Model(&run).Updates(map[string]any{"outcome": outcome, "finished_at": d.now()}).Error; err != nil {
			return err
		}
		return tx.Model(&taskRow{}).Where("id = ?", run.TaskID).Update("last_outcome", outcome).Error
	}))
}

// InterruptRuns marks the runs a stop cut between their claim and their
// outcome: they are not run again.
func (d *DB) InterruptRuns(ctx context.Context) (int64, error) {
	const outcome = "interrupted: loadout stopped while starting it; not run again"
	var n int64
	err := d.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var runs []taskRun
		if err := tx.Where("finished_at IS NULL").Find(&runs).Error; err != nil {
			return err
		}
		for _, r := range runs {
			if err := tx.Model(&r).Updates(map[string]any{"outcome": outcome, "finished_at": d.now()}).Error; err != nil {
				return err
			}
			if err := tx.Model(&taskRow{}).Where("id = ?", r.TaskID).Update("last_outcome", outcome).Error; err != nil {
				return err
			}
		}
		n = int64(len(runs))
		return nil
	})
	return n, kind(err)
}

// customTool is a tool an admin made in a chat, as its manifest entry.
type customTool struct {
	Name      string `gorm:"primaryKey"`
	Spec      string `gorm:"not null"`
	CreatedBy string
	UpdatedAt time.Time
}

// CustomTools are the custom tools by name.
func (d *DB) CustomTools(ctx context.Context) ([]custom.Spec, error) {
	var rows []customTool
	if err := d.db.WithContext(ctx).Order("name").Find(&rows).Error; err != nil {
		return nil, kind(err)
	}
	var out []custom.Spec
	for _, r := range rows {
		var s custom.Spec
		if err := json.Unmarshal([]byte(r.Spec), &s); err != nil {
			return nil, fmt.Errorf("custom tool %s: %w", r.Name, err)
		}
		out = append(out, s)
	}
	return out, nil
}

// SaveCustomTool creates or replaces a custom tool.
func (d *DB) SaveCustomTool(ctx context.Context, s custom.Spec, by string) error {
	b, err := json.Marshal(s)
	if err != nil {
		return err
	}
	row := customTool{Name: s.Name, Spec: string(b), CreatedBy: by, UpdatedAt: d.now()}
	return kind(d.db.WithContext(ctx).Clauses(clause.OnConflict{Columns: []clause.Column{{Name: "name"}},
		DoUpdates: clause.AssignmentColumns([]string{"spec", "updated_at"})}).Create(&row).Error)
}

// DeleteCustomTool deletes a custom tool.
func (d *DB) DeleteCustomTool(ctx context.Context, name string) (bool, error) {
	res := d.db.WithContext(ctx).Where("name = ?", name).Delete(&customTool{})
	return res.RowsAffected > 0, kind(res.Error)
}
