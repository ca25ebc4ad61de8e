package templates

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// waited says how long a run has waited, coarse enough to read at a glance:
// "12 s", "3 min", "2 h 5 min", "4 d". A since after now (clock skew between
// the database and this process) reads as "0 s".
func waited(since, now time.Time) string {
	d := now.Sub(since)
	if d < 0 {
		d = 0
	}
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%d s", int(d/time.Second))
	case d < time.Hour:
		return fmt.Sprintf("%d min", int(d/time.Minute))
	case d < 24*time.Hour:
		h, m := int(d/time.Hour), int(d%time.Hour/time.Minute)
		if m == 0 {
			return fmt.Sprintf("%d h", h)
		}
		return fmt.Sprintf("%d h %d min", h, m)
	default:
		return fmt.Sprintf("%d d", int(d/(24*time.Hour)))
	}
}

// expiresIn says when a turn's deadline passes, as coarsely as waited:
// "expires in 3 h" for a deadline 2 h 59 min 59 s away, rounded to the
// minute; a deadline that passed reads as a worker is about to act on it.
func expiresIn(deadline, now time.Time) string {
	d := deadline.Sub(now)
	if d <= 0 {
		return "expired; settled shortly"
	}
	if d >= time.Minute {
		d = d.Round(time.Minute)
	}
	return "expires in " + waited(now, now.Add(d))
}

// renderedAt is the page's clock: the view model's Now, or the wall clock
// when a handler left it unset.
func renderedAt(now time.Time) time.Time {
	if now.IsZero() {
		return time.Now()
	}
	return now
}

// withTitle gives a page a default title when its handler set none.
func withTitle(p Page, title string) Page {
	if p.Title == "" {
		p.Title = title
	}
	return p
}

// errorHeading is the error page's heading: the handler's, or the status
// text, never anything taken from an error value.
func errorHeading(p ErrorPage) string {
	if p.Heading != "" {
		return p.Heading
	}
	if t := http.StatusText(p.Status); t != "" {
		return t
	}
	return "Something went wrong"
}

// stamp formats a time for people; the zero time is a dash.
func stamp(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	return t.Format("2006-01-02 15:04:05 MST")
}

// machineTime is a time for a datetime attribute.
func machineTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.Format(time.RFC3339)
}

func itoa(n int) string     { return strconv.Itoa(n) }
func i64toa(n int64) string { return strconv.FormatInt(n, 10) }

// bound formats a schema minimum or maximum for a min/max attribute.
func bound(f *float64) string { return strconv.FormatFloat(*f, 'f', -1, 64) }

// label is what a field's <label> says: its title, else its name.
func label(f Field) string {
	if f.Label != "" {
		return f.Label
	}
	return f.Name
}

// fieldID is the id of an input form control, unique on the inbox page
// where several runs show their forms.
func fieldID(runID int64, f Field, suffix string) string {
	return fmt.Sprintf("run-%d-field-%s%s", runID, f.Name, suffix)
}

// describedBy joins the ids of a control's help text and error message.
func describedBy(runID int64, f Field) string {
	ids := ""
	if f.Description != "" {
		ids = fieldID(runID, f, "-help")
	}
	if f.Error != "" {
		if ids != "" {
			ids += " "
		}
		ids += fieldID(runID, f, "-error")
	}
	return ids
}

func decisionURL(id int64) string { return fmt.Sprintf("/inbox/runs/%d/decision", id) }
func inputURL(id int64) string    { return fmt.Sprintf("/inbox/runs/%d/input", id) }
func runURL(id int64) string      { return fmt.Sprintf("/runs/%d", id) }
func inboxRunURL(id int64) string { return fmt.Sprintf("/inbox/runs/%d", id) }
func cancelURL(id int64) string   { return fmt.Sprintf("/runs/%d/cancel", id) }
func messagesURL(id int64) string { return fmt.Sprintf("/runs/%d/messages", id) }

// plural is "1 step", "2 steps".
func plural(n int, one, many string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, one)
	}
	return fmt.Sprintf("%d %s", n, many)
}

func boolText(b bool) string {
	if b {
		return "true"
	}
	return "false"
}

// StatusText is a run status for people: "waiting for approval".
func StatusText(status string) string {
	return strings.ReplaceAll(status, "_", " ")
}

// editID is the id of a control of a call's edit form.
func editID(runID int64, callID, part string) string {
	return fmt.Sprintf("run-%d-edit-%s-%s", runID, callID, part)
}

// perCall reports whether a card decides its turn call by call: a turn of
// two or more calls, for someone who may approve.
func perCall(run InboxRun) bool {
	return len(run.Calls) > 1 && run.Calls[0].Choice != nil
}

// choiceID is the id of a part of a call's fieldset, by the call's place
// in the turn: a call id may hold what an id may not.
func choiceID(runID int64, call int, part string) string {
	return fmt.Sprintf("run-%d-call-%d-%s", runID, call, part)
}
