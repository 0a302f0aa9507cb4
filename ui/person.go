package ui

import (
	"errors"
	"net/http"
	"slices"

	"loadout/tools/schedule"
)

// person is one person's page: the operator's view of anyone, a
// person's of themselves only.
func (c *Console) person(w http.ResponseWriter, r *http.Request, v viewer) error {
	k, err := key(r, "key", false)
	if err != nil {
		return err
	}
	if !v.owns(k) {
		return errForbidden
	}
	return c.personPage(w, r, v, k)
}

// taskRow is a task as a page shows it.
type taskRow struct {
	schedule.Task
	When  string
	State string
}

func (c *Console) personPage(w http.ResponseWriter, r *http.Request, v viewer, user string) error {
	ctx := r.Context()
	chats, err := c.d.Store.Chats(ctx, user, "", chatsPerPage)
	if err != nil {
		return err
	}
	pending, err := c.d.Store.Approvals(ctx, user, true, approvalsShown)
	if err != nil {
		return err
	}
	ts, err := c.d.Store.Tasks(ctx, user, tasksShown)
	if err != nil {
		return err
	}
	tasks := make([]taskRow, len(ts))
	for i, t := range ts {
		tasks[i] = taskRow{Task: t, When: when(t), State: "next " + t.NextRun.Format("2006-01-02 15:04 UTC")}
		if t.NextRun.IsZero() {
			tasks[i].State = "not scheduled (paused or done)"
		}
	}
	mems, err := c.d.Store.RecentMemories(ctx, user, memoriesShown)
	if err != nil {
		return err
	}
	data := map[string]any{"User": user, "Chats": c.rows(chats), "Pending": pending, "Tasks": tasks, "Memories": mems,
		"Google": c.d.Google != nil, "Self": user == v.UserKey}
	if c.d.Google != nil {
		email, ok, at, err := c.d.Google.Account(ctx, user)
		if err != nil {
			return err
		}
		data["Connected"], data["Email"], data["Since"] = ok, email, at
	}
	c.render(w, r, http.StatusOK, "person", v, data)
	return nil
}

func when(t schedule.Task) string {
	switch t.Kind {
	case schedule.Every:
		return "every " + t.Interval.String()
	case schedule.Cron:
		return "cron " + t.Cron + " (" + t.TimeZone + ")"
	}
	return "once at " + t.At.Format("2006-01-02 15:04 UTC")
}

// taskAct pauses, resumes, runs or deletes a task, under the schedule
// tool's owner rules: its owner, or the operator.
func (c *Console) taskAct(w http.ResponseWriter, r *http.Request, v viewer) error {
	tid, err := id(r, "id")
	if err != nil {
		return err
	}
	do := r.PostFormValue("do")
	if !slices.Contains([]string{"pause", "resume", "run", "delete"}, do) {
		return bad("The parameter \"do\" must be pause, resume, run or delete.")
	}
	t, err := c.d.Store.Task(r.Context(), tid)
	if err != nil {
		return err
	}
	if !v.owns(t.UserKey) {
		c.log.Warn("ui: refused an action on someone else's task", "user", v.UserKey, "task", t.ID)
		return errForbidden
	}
	if c.d.Scheduler == nil {
		return errors.New("ui: no scheduler")
	}
	done := map[string]string{"pause": "paused", "resume": "resumed", "run": "ran", "delete": "deleted"}[do]
	switch do {
	case "pause":
		err = c.d.Scheduler.Pause(r.Context(), t)
	case "resume":
		err = c.d.Scheduler.Resume(r.Context(), t)
	case "run":
		err = c.d.Scheduler.RunNow(r.Context(), t)
	case "delete":
		err = c.d.Scheduler.Delete(r.Context(), t)
	}
	if err != nil {
		return err
	}
	c.log.Info("ui: task "+done, "user", v.UserKey, "task", t.ID)
	http.Redirect(w, r, back(r, "/", done), http.StatusSeeOther)
	return nil
}

// forget deletes a memory of its owner.
func (c *Console) forget(w http.ResponseWriter, r *http.Request, v viewer) error {
	user, err := key(r, "user", true)
	if err != nil {
		return err
	}
	mid, err := id(r, "id")
	if err != nil {
		return err
	}
	if !v.owns(user) {
		return errForbidden
	}
	ok, err := c.d.Store.ForgetMemory(r.Context(), user, mid)
	if err != nil {
		return err
	}
	c.log.Info("ui: memory deleted", "user", v.UserKey, "owner", user, "memory", mid, "changed", ok)
	http.Redirect(w, r, back(r, "/", map[bool]string{true: "deleted", false: "notfound"}[ok]), http.StatusSeeOther)
	return nil
}

// revoke disconnects a person's Google account.
func (c *Console) revoke(w http.ResponseWriter, r *http.Request, v viewer) error {
	user, err := key(r, "user", true)
	if err != nil {
		return err
	}
	if !v.owns(user) {
		return errForbidden
	}
	if c.d.Google == nil {
		return bad("Google is not set up on this server.")
	}
	if err := c.d.Google.Disconnect(r.Context(), user); err != nil {
		c.log.Warn("ui: Google disconnect", "owner", user, "err", err)
	}
	c.log.Info("ui: Google account disconnected", "user", v.UserKey, "owner", user)
	http.Redirect(w, r, back(r, "/", "revoked"), http.StatusSeeOther)
	return nil
}

// signOutEverywhere ends every session of a person (the operator's
// included, when the operator names ui:operator): each browser signed in
// as them is sent back to the sign-in form at its next request.
func (c *Console) signOutEverywhere(w http.ResponseWriter, r *http.Request, v viewer) error {
	user, err := key(r, "user", true)
	if err != nil {
		return err
	}
	if !v.owns(user) {
		return errForbidden
	}
	n, err := c.d.Store.DeleteUserWebSessions(r.Context(), user)
	if err != nil {
		return err
	}
	c.log.Info("ui: signed out everywhere", "user", v.UserKey, "owner", user, "sessions", n)
	if user == v.UserKey {
		c.clearCookie(w)
		http.Redirect(w, r, "/login", http.StatusSeeOther)
		return nil
	}
	http.Redirect(w, r, back(r, "/people", "signedout"), http.StatusSeeOther)
	return nil
}
