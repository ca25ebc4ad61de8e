package main

import (
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The targets of the issue, on a 2-core, 24 GiB machine.
const (
	targetStreams        = 10000
	targetRSS            = 1 << 30
	targetLatenessP99    = time.Second
	targetFirstLineP50   = 5 * time.Millisecond
	targetFirstLineP99   = 20 * time.Millisecond
	targetDurablePerSec  = 1000
	bareGoStreamPerBytes = 27 << 10 // NOTES.md: a bare Go NDJSON server, 267 MiB for 10,000 streams
)

// targetSigninRSSGrowth bounds what a flood of wrong passwords may add to
// the server's RSS: four argon2id checks of 19 MiB at once, with room for
// the garbage collector's lag.
const targetSigninRSSGrowth = 256 << 20

// report is everything one invocation prints.
type report struct {
	date      time.Time
	command   string
	url       string
	keepalive time.Duration
	cpus      int
	memory    int64
	pid       int
	dbPID     int
	phases    []string
	// loads are the 1-minute load averages at the start and after each
	// phase.
	loads []string
	notes []string

	streams   *streamsResult
	firstLine *firstLineResult
	burst     *burstResult
	durable   *durableResult
	signin    *signinResult
	followers *followersResult
	steps     *stepsResult
	bulkFlood *bulkFloodResult
	followups *followupsResult
	feed      *feedResult
}

func (r *report) note(s string) { r.notes = append(r.notes, s) }

// row is one line of the table.
type row struct{ measurement, measured, target, verdict string }

func verdict(ok bool) string {
	if ok {
		return "pass"
	}
	return "**fail**"
}

// rows are the table's lines for the phases that ran.
func (r *report) rows() []row {
	var rows []row
	if s := r.streams; s != nil {
		ok := s.failures == 0 && s.peakOpen >= targetStreams
		measured := fmt.Sprintf("%s open at once (%s started, %s failed)", fmtInt(s.peakOpen), fmtInt(s.n), fmtInt(s.failures))
		if s.opened == 0 && s.firstErr != "" {
			measured = "none opened: " + s.firstErr
		}
		rows = append(rows, row{"concurrent streamed continuations", measured, "10,000", verdict(ok)})
		if s.rssBefore >= 0 && s.rssPeak >= 0 {
			rows = append(rows, row{"server RSS before → at peak",
				fmt.Sprintf("%s → %s", fmtBytes(s.rssBefore), fmtBytes(s.rssPeak)),
				"≤ 1 GiB", verdict(s.rssPeak <= targetRSS)})
			measured := fmtBytes(s.perStream()) + " ((peak − before) / N)"
			if s.rssAllOpen >= 0 {
				measured += fmt.Sprintf("; %s with all open, before any settled", fmtBytes((s.rssAllOpen-s.rssBefore)/int64(s.n)))
			}
			rows = append(rows, row{"memory per open continuation", measured,
				fmt.Sprintf("— (bare Go NDJSON stream: %s)", fmtBytes(bareGoStreamPerBytes)), "—"})
		} else {
			rows = append(rows, row{"server RSS", "not measured", "≤ 1 GiB", "—"})
		}
		if s.lateness.n > 0 {
			rows = append(rows, row{"keepalive lateness p50 / p99 (max)",
				fmt.Sprintf("%s / %s (%s), %s keepalives", fmtDur(s.lateness.p50), fmtDur(s.lateness.p99),
					fmtDur(s.lateness.max), fmtInt(s.lateness.n)),
				"p99 ≤ 1 s", verdict(s.lateness.p99 <= targetLatenessP99)})
		} else {
			rows = append(rows, row{"keepalive lateness", "no keepalive arrived", "p99 ≤ 1 s", verdict(false)})
		}
		if h := s.latenessHeld; h.n > 0 {
			rows = append(rows, row{"… of those, while all were open and none had ended",
				fmt.Sprintf("%s / %s (%s), %s keepalives", fmtDur(h.p50), fmtDur(h.p99), fmtDur(h.max), fmtInt(h.n)),
				"p99 ≤ 1 s", verdict(h.p99 <= targetLatenessP99)})
		}
	}
	if f := r.firstLine; f != nil {
		if f.serial.n > 0 {
			rows = append(rows, row{"POST → first line p50 / p99, one at a time",
				fmt.Sprintf("%s / %s (%s decisions)", fmtDur(f.serial.p50), fmtDur(f.serial.p99), fmtInt(f.serial.n)),
				"— (the floor)", "—"})
		}
		rows = append(rows, f.steadyRow(), f.burstRow())
	}
	if b := r.burst; b != nil {
		rows = append(rows, b.rows()...)
	}
	if d := r.durable; d != nil {
		label := "durable decisions recorded per second"
		if d.recorded == 0 {
			rows = append(rows, row{label, "none recorded: " + d.firstErr, "≥ 1,000/s", verdict(false)})
		} else {
			measured := fmt.Sprintf("%s/s (%s in %s, %d clients; answer p50 %s / p99 %s)", fmtInt(int(d.rate())),
				fmtInt(d.recorded), fmtDur(d.elapsed), d.concurrency, fmtDur(d.latency.p50), fmtDur(d.latency.p99))
			if d.verified >= 0 {
				measured += fmt.Sprintf("; %s found durable in the database", fmtInt(d.verified))
			}
			ok := d.failures == 0 && d.rate() >= targetDurablePerSec && (d.verified < 0 || d.verified == d.recorded)
			rows = append(rows, row{label, measured, "≥ 1,000/s", verdict(ok)})
		}
	}
	if s := r.signin; s != nil {
		rows = append(rows, s.rows()...)
	}
	if f := r.followers; f != nil {
		rows = append(rows, f.rows()...)
	}
	if s := r.steps; s != nil {
		rows = append(rows, s.rows()...)
	}
	if b := r.bulkFlood; b != nil {
		rows = append(rows, b.rows()...)
	}
	if f := r.followups; f != nil {
		rows = append(rows, f.rows()...)
	}
	if f := r.feed; f != nil {
		rows = append(rows, f.rows()...)
	}
	return rows
}

// steadyRow is the first-line phase's figure under the target: steadyN
// decisions in flight at all times.
func (f *firstLineResult) steadyRow() row {
	label := fmt.Sprintf("POST → first line p50 / p99, %d in flight (steady)", f.steadyN)
	const target = "≤ 5 ms / ≤ 20 ms"
	if f.steady.n == 0 {
		return row{label, "no first line: " + f.firstErr, target, verdict(false)}
	}
	ok := f.failures == 0 && f.steady.p50 <= targetFirstLineP50 && f.steady.p99 <= targetFirstLineP99
	return row{label, firstLineMeasured(f.steady, f.steadyHeaders, fmt.Sprintf("median %d in flight", f.steadyInFlight)),
		target, verdict(ok)}
}

// burstRow is the first-line phase's stress figure: n decisions posted in
// the same instant queue for the same cores, so it has no target.
func (f *firstLineResult) burstRow() row {
	label := fmt.Sprintf("POST → first line p50 / p99, %d posted in the same instant", f.n)
	measured := "no first line: " + f.firstErr
	if f.firstLine.n > 0 {
		measured = firstLineMeasured(f.firstLine, f.headers)
	}
	return row{label, measured, "— (a stress figure)", "—"}
}

// firstLineMeasured writes first-line times: p50 / p99, then in
// parentheses the count, the headers' p50 / p99 and any more details.
func firstLineMeasured(first, headers summary, more ...string) string {
	details := append([]string{fmtInt(first.n) + " decisions",
		fmt.Sprintf("headers %s / %s", fmtDur(headers.p50), fmtDur(headers.p99))}, more...)
	return fmt.Sprintf("%s / %s (%s)", fmtDur(first.p50), fmtDur(first.p99), strings.Join(details, "; "))
}

// markdownTable renders rows as a Markdown table with aligned pipes.
func markdownTable(header row, rows []row) string {
	all := append([]row{header}, rows...)
	width := [4]int{}
	for _, r := range all {
		for i, c := range r.cells() {
			width[i] = max(width[i], len([]rune(c)))
		}
	}
	var b strings.Builder
	line := func(cells [4]string) {
		b.WriteString("|")
		for i, c := range cells {
			b.WriteString(" " + c + strings.Repeat(" ", width[i]-len([]rune(c))) + " |")
		}
		b.WriteString("\n")
	}
	line(header.cells())
	var sep [4]string
	for i := range sep {
		sep[i] = strings.Repeat("-", width[i])
	}
	line(sep)
	for _, r := range rows {
		line(r.cells())
	}
	return b.String()
}

func (r row) cells() [4]string {
	esc := func(s string) string { return strings.ReplaceAll(s, "|", `\|`) }
	return [4]string{esc(r.measurement), esc(r.measured), esc(r.target), esc(r.verdict)}
}

// write prints the table, then the setting and how long each phase took.
func (r *report) write(w io.Writer) {
	fmt.Fprintf(w, "\n### Load test, %s\n\n", r.date.Format("2006-01-02"))
	fmt.Fprint(w, markdownTable(row{"measurement", "measured", "target", "result"}, r.rows()))
	fmt.Fprintf(w, "\nMeasured %s on %d cores, %s of memory, against %s (server pid %d, database pid %d, --keepalive %s).\n",
		r.date.Format("2006-01-02 15:04 MST"), r.cpus, fmtBytes(r.memory), r.url, r.pid, r.dbPID, r.keepalive)
	fmt.Fprintf(w, "Command: `%s`\n\n", r.command)
	if len(r.loads) > 0 {
		fmt.Fprintf(w, "- machine load average (1 min) at the start and after each phase: %s\n", strings.Join(r.loads, ", "))
	}
	if s := r.streams; s != nil {
		fmt.Fprintf(w, "- streams: %s runs prepared in %s; all open %s after the first POST; phase %s;",
			fmtInt(s.n), fmtDur(s.setupTime), fmtDur(s.openTime), fmtDur(s.phaseTime))
		fmt.Fprintf(w, " RSS with all open %s; %s completed", fmtBytes(s.rssAllOpen), fmtInt(s.completed))
		if s.serverFDs != 0 {
			fmt.Fprintf(w, "; server open-file limit %s", fdLimit(s.serverFDs))
		}
		fmt.Fprintf(w, "%s%s\n", cpuNote(s.cpu, s.n, "continuation"), failureNote(s.failures, s.firstErr))
	}
	if f := r.firstLine; f != nil {
		fmt.Fprintf(w, "- first-line: %s runs prepared in %s; %d one at a time, then %s with %d in flight in %s (%s/s; first line max %s),"+
			" then %d rounds of %d at once (first line max %s), in %s; %s completed%s\n",
			fmtInt(f.decisions()), fmtDur(f.setupTime), f.serialN, fmtInt(f.steadyDecisions), f.steadyN, fmtDur(f.steadyTime),
			fmtInt(int(f.steadyRate())), fmtDur(f.steady.max), f.rounds, f.n, fmtDur(f.firstLine.max), fmtDur(f.phaseTime),
			fmtInt(f.completed), cpuNote(f.cpu, f.decisions(), "decision")+failureNote(f.failures, f.firstErr))
	}
	if b := r.burst; b != nil {
		fmt.Fprint(w, b.line())
	}
	if d := r.durable; d != nil {
		fmt.Fprintf(w, "- durable: %s runs prepared in %s; %s decisions in %s; answer max %s%s\n",
			fmtInt(d.n+1), fmtDur(d.setupTime), fmtInt(d.recorded), fmtDur(d.elapsed), fmtDur(d.latency.max),
			cpuNote(d.cpu, d.recorded, "decision")+failureNote(d.failures, d.firstErr))
	}
	if s := r.signin; s != nil {
		fmt.Fprintf(w, "- signin: %s of %d wrong-password sign-ins at once%s, %s posted in %s; answer max %s%s\n",
			s.roundsText(), s.n, targetText(s.target), fmtInt(s.posted), fmtDur(s.phaseTime), fmtDur(s.latency.max),
			cpuNote(s.cpu, s.posted, "attempt")+failureNote(s.failures, s.firstErr))
	}
	if f := r.followers; f != nil {
		fmt.Fprint(w, f.line())
	}
	if s := r.steps; s != nil {
		fmt.Fprint(w, s.line())
	}
	if b := r.bulkFlood; b != nil {
		fmt.Fprint(w, b.line())
	}
	if f := r.followups; f != nil {
		fmt.Fprint(w, f.line())
	}
	if f := r.feed; f != nil {
		fmt.Fprint(w, f.line())
	}
	for _, n := range r.notes {
		fmt.Fprintf(w, "- note: %s\n", n)
	}
}

// cpuNote tells the CPU time the server and the database used, in all
// and per unit of work.
func cpuNote(c cpuSample, n int, unit string) string {
	var parts []string
	for _, p := range []struct {
		who  string
		used time.Duration
	}{{"server", c.server}, {"database", c.db}} {
		if p.used < 0 {
			continue
		}
		per := ""
		if n > 0 {
			per = fmt.Sprintf(" (%s per %s)", fmtDur(p.used/time.Duration(n)), unit)
		}
		parts = append(parts, fmt.Sprintf("%s CPU %s%s", p.who, fmtDur(p.used), per))
	}
	if len(parts) == 0 {
		return ""
	}
	return "; " + strings.Join(parts, ", ")
}

func failureNote(n int, first string) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf("; **%d failed**, first: %s", n, first)
}

func fdLimit(n int64) string {
	if n < 0 {
		return "unlimited"
	}
	return fmtInt(int(n))
}

// fmtInt writes an integer with thousands separators: 10,000.
func fmtInt(n int) string {
	s := strconv.Itoa(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var parts []string
	for len(s) > 3 {
		parts = append(parts, s[len(s)-3:])
		s = s[:len(s)-3]
	}
	parts = append(parts, s)
	slices.Reverse(parts)
	out := strings.Join(parts, ",")
	if neg {
		out = "-" + out
	}
	return out
}

// fmtBytes writes a size in KiB, MiB or GiB; "n/a" when negative.
func fmtBytes(n int64) string {
	switch {
	case n < 0:
		return "n/a"
	case n >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.0f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// fmtDur writes a duration with three significant digits at most, in µs,
// ms or s.
func fmtDur(d time.Duration) string {
	neg := d < 0
	if neg {
		d = -d
	}
	var s string
	switch {
	case d < time.Millisecond:
		s = fmt.Sprintf("%d µs", d.Microseconds())
	case d < 10*time.Millisecond:
		s = fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond))
	case d < time.Second:
		s = fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond))
	case d < 100*time.Second:
		s = fmt.Sprintf("%.2f s", d.Seconds())
	default:
		s = fmt.Sprintf("%.0f s", d.Seconds())
	}
	if neg {
		return "−" + s
	}
	return s
}

var dsnPassword = regexp.MustCompile(`^([^:@/]*):[^@]*@`)

// commandLine is the invocation as it can be pasted again, with the
// token and the DSN's password left out.
func commandLine(args []string) string {
	out := []string{"go run ./cmd/loadtest"}
	redactNext := ""
	for _, a := range args {
		switch {
		case redactNext == "token":
			a = "tst_…"
		case redactNext == "dsn":
			a = dsnPassword.ReplaceAllString(a, "$1:…@")
		}
		redactNext = ""
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if strings.HasPrefix(a, "-") {
			switch {
			case name == "token" && hasValue:
				a = a[:len(a)-len(value)] + "tst_…"
			case name == "token":
				redactNext = "token"
			case name == "dsn" && hasValue:
				a = a[:len(a)-len(value)] + dsnPassword.ReplaceAllString(value, "$1:…@")
			case name == "dsn":
				redactNext = "dsn"
			}
		}
		out = append(out, shellQuote(a))
	}
	return strings.Join(out, " ")
}

// shellQuote quotes an argument for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./:=,@+…", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
