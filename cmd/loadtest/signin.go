package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The sign-in form as the server renders it (web/login.go): a cookie of
// its own holds the CSRF token, and the form repeats it (double submit).
const loginCSRFCookie = "turnstile_login_csrf"

var csrfField = regexp.MustCompile(`name="csrf_token" value="([^"]+)"`)

// signinSampleEvery is the signin phase's RSS sampling interval at the
// longest: a password check lasts ~25 ms, so a slower sampling would see
// the checks' memory only by luck.
const signinSampleEvery = 10 * time.Millisecond

// maxFloodAddrs is how many distinct 10.77.x.y addresses floodAddr makes.
const maxFloodAddrs = 256 * 250

// What the signin phase's attempts guess at (--signin-target).
const (
	// signinFlood: each attempt has a name and an address of its own, so
	// that no throttle refuses any: what a flood costs the server.
	signinFlood = "flood"
	// signinOneName: a round's attempts are all for one name from one
	// address, which the server checks at most signinNameLimit times.
	signinOneName = "name"
	// signinOneAddr: a round's attempts all come from one address, a name
	// each, which the server checks at most signinAddrLimit times.
	signinOneAddr = "address"
)

// The server's free failures (web/login_guard.go): a name's, and an
// address's.
const (
	signinNameLimit = 5
	signinAddrLimit = 20
)

// signinLimit is the most passwords a round may get checked for target; 0
// when none is set (a flood).
func signinLimit(target string) int {
	switch target {
	case signinOneName:
		return signinNameLimit
	case signinOneAddr:
		return signinAddrLimit
	}
	return 0
}

// targetText is what the attempts of a round have in common, for the
// report.
func targetText(target string) string {
	switch target {
	case signinOneName:
		return " for one name from one address"
	case signinOneAddr:
		return " from one address, a name each"
	}
	return ""
}

// signinResult is what the signin phase measured.
type signinResult struct {
	n, rounds int
	target    string
	checked   []int       // 401s, by round
	posted    int         // attempts sent; the others failed before, at GET /login
	answers   map[int]int // every answer that arrived, by status code
	failures  int         // attempts without an expected answer, GET /login's failures included
	firstErr  string
	latency   summary // from sending a POST to the end of its answer, for every answer
	latencies []time.Duration
	// Server RSS in bytes (-1: unknown): before the phase, and the highest
	// sample during it.
	rssBefore, rssPeak int64
	phaseTime          time.Duration
	cpu                cpuSample // used from the first GET /login to the last answer
}

func (r *signinResult) fail(err error) {
	failMu.Lock()
	defer failMu.Unlock()
	r.failures++
	if r.firstErr == "" {
		r.firstErr = err.Error()
	}
}

func (r *signinResult) answered(status int, took time.Duration) {
	failMu.Lock()
	defer failMu.Unlock()
	r.answers[status]++
	r.latencies = append(r.latencies, took)
}

// signinPhase posts o.signinRounds rounds of o.signinN wrong-password
// sign-ins released in the same instant, each from a fresh client. For a
// flood each has its own name and X-Forwarded-For address, so that neither
// throttle refuses them before their password checks: the server must
// bound what they cost by itself. For one name (or one address) a round's
// attempts share it, and the server must check no more than its limit.
// Each round starts when the previous one's answers all arrived.
func (l *loadtest) signinPhase(ctx context.Context) *signinResult {
	o := l.o
	res := &signinResult{n: o.signinN, rounds: o.signinRounds, target: o.signinTarget, answers: map[int]int{},
		rssBefore: -1, rssPeak: -1, cpu: unknownCPU}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	// Names and addresses fresh for this invocation: the server remembers
	// failures for 15 minutes, and a name is throttled after 5.
	tag := strconv.FormatInt(time.Now().Unix(), 36)
	firstAddr := rand.IntN(maxFloodAddrs)
	res.rssBefore, _ = l.rss()
	sampler := l.sampleRSS(min(o.sampleEvery, signinSampleEvery), func() bool { return false })
	cpuStart := l.cpu()
	start := time.Now()
	for round := range o.signinRounds {
		if ctx.Err() != nil {
			break
		}
		attempts := make([]*signinAttempt, o.signinN)
		for i := range attempts {
			k := round*o.signinN + i
			a := &signinAttempt{name: fmt.Sprintf("loadtest-flood-%s-%d", tag, k), addr: floodAddr((firstAddr + k) % maxFloodAddrs)}
			switch o.signinTarget {
			case signinOneName:
				a.name, a.addr = fmt.Sprintf("loadtest-name-%s-%d", tag, round), floodAddr((firstAddr+round)%maxFloodAddrs)
			case signinOneAddr:
				a.addr = floodAddr((firstAddr + round) % maxFloodAddrs)
			}
			attempts[i] = a
		}
		before := res.answers[http.StatusUnauthorized]
		l.signinRound(ctx, res, attempts)
		res.checked = append(res.checked, res.answers[http.StatusUnauthorized]-before)
		l.logf("signin: round %d of %d done: %s", round+1, o.signinRounds, statusCounts(res.answers))
	}
	res.phaseTime, res.cpu = time.Since(start), l.since(cpuStart)
	res.rssPeak, _ = sampler()
	res.latency = summarize(res.latencies)
	return res
}

// signinRound fetches every attempt's form, then posts them all at once
// and waits for their answers.
func (l *loadtest) signinRound(ctx context.Context, res *signinResult, attempts []*signinAttempt) {
	for _, a := range attempts {
		a.c = newSigninClient()
		defer a.c.CloseIdleConnections()
	}
	// The forms first, so that the posts measure the sign-ins alone; each
	// client keeps its connection for its post.
	parallel(ctx, len(attempts), l.o.setupConcurrency, func(ctx context.Context, i int) error {
		if err := attempts[i].form(ctx, l.o.url); err != nil {
			res.fail(fmt.Errorf("%s: GET /login: %w", attempts[i].name, err))
			attempts[i].c = nil
		}
		return nil
	})
	gate := make(chan struct{})
	var wg sync.WaitGroup
	for _, a := range attempts {
		if a.c == nil {
			continue
		}
		res.posted++
		wg.Go(func() {
			<-gate
			sent := time.Now()
			status, retryAfter, err := a.post(ctx, l.o.url)
			if err != nil {
				res.fail(fmt.Errorf("%s: POST /login: %w", a.name, err))
				return
			}
			res.answered(status, time.Since(sent))
			if err := signinAnswerError(status, retryAfter); err != nil {
				res.fail(fmt.Errorf("%s: POST /login: %w", a.name, err))
			}
		})
	}
	close(gate)
	wg.Wait()
}

// signinAttempt is one wrong-password sign-in from its own client.
type signinAttempt struct {
	c          *http.Client
	name, addr string
	token      string // the form's CSRF token, which its cookie holds too
}

// newSigninClient is a client of its own: one connection, no cookie jar
// (the attempt carries its one cookie itself), and no redirect followed,
// for a 303 would be a sign-in that succeeded.
func newSigninClient() *http.Client {
	tr := &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: 10 * time.Second}).DialContext,
		MaxIdleConnsPerHost: 1,
		IdleConnTimeout:     time.Minute,
		DisableCompression:  true,
	}
	return &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// form fetches the sign-in form and keeps its CSRF token, which the cookie
// and the hidden field must both carry.
func (a *signinAttempt) form(ctx context.Context, base *url.URL) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base.String()+"/login", nil)
	if err != nil {
		return err
	}
	resp, err := a.c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return errors.New(answerError(resp))
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return err
	}
	m := csrfField.FindSubmatch(body)
	if m == nil {
		return errors.New("the form has no csrf_token field")
	}
	for _, c := range resp.Cookies() {
		if c.Name == loginCSRFCookie {
			if c.Value != string(m[1]) {
				return fmt.Errorf("the %s cookie and the form's csrf_token differ", loginCSRFCookie)
			}
			a.token = c.Value
			return nil
		}
	}
	return fmt.Errorf("no %s cookie", loginCSRFCookie)
}

// post sends the wrong password and reads the answer to its end; it
// returns the status and the Retry-After header.
func (a *signinAttempt) post(ctx context.Context, base *url.URL) (status int, retryAfter string, err error) {
	form := url.Values{"username": {a.name}, "password": {"not the password"}, "csrf_token": {a.token}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base.String()+"/login", strings.NewReader(form.Encode()))
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("X-Forwarded-For", a.addr)
	req.AddCookie(&http.Cookie{Name: loginCSRFCookie, Value: a.token})
	resp, err := a.c.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return 0, "", fmt.Errorf("read the answer: %w", err)
	}
	return resp.StatusCode, resp.Header.Get("Retry-After"), nil
}

// signinAnswerError says what is wrong with an answer to a wrong password:
// nil for 401, and for 503 (no password check came free) and 429 (the name
// or address is throttled) when they say when to retry.
func signinAnswerError(status int, retryAfter string) error {
	switch status {
	case http.StatusUnauthorized:
		return nil
	case http.StatusServiceUnavailable, http.StatusTooManyRequests:
		if secs, err := strconv.Atoi(retryAfter); err != nil || secs < 1 {
			return fmt.Errorf("answered %d with Retry-After %q, not a number of seconds", status, retryAfter)
		}
		return nil
	case http.StatusSeeOther:
		return errors.New("answered 303: a wrong password signed in")
	}
	return fmt.Errorf("answered %d, not 401, 503 or 429", status)
}

// floodAddr is the k-th of maxFloodAddrs distinct addresses, 10.77.0.1
// to 10.77.255.250.
func floodAddr(k int) string { return fmt.Sprintf("10.77.%d.%d", k/250, k%250+1) }

// statusCounts writes answers by status: the expected 401, 503 and 429
// always, in that order, then any other in ascending order.
func statusCounts(answers map[int]int) string {
	expected := []int{http.StatusUnauthorized, http.StatusServiceUnavailable, http.StatusTooManyRequests}
	parts := make([]string, 0, len(answers)+len(expected))
	for _, s := range expected {
		parts = append(parts, fmt.Sprintf("%d: %s", s, fmtInt(answers[s])))
	}
	var others []int
	for s := range answers {
		if !slices.Contains(expected, s) {
			others = append(others, s)
		}
	}
	slices.Sort(others)
	for _, s := range others {
		parts = append(parts, fmt.Sprintf("%d: %s", s, fmtInt(answers[s])))
	}
	return strings.Join(parts, ", ")
}

// rows are the signin phase's lines of the table.
func (r *signinResult) rows() []row {
	flood := fmt.Sprintf("%d wrong-password sign-ins at once%s, %s", r.n, targetText(r.target), r.roundsText())
	const rssTarget = "peak − before ≤ 256 MiB"
	var rows []row
	switch {
	case r.posted == 0:
		rows = append(rows, row{"server RSS before → at peak, " + flood, "no sign-in posted: " + r.firstErr, rssTarget, verdict(false)})
	case r.rssBefore < 0 || r.rssPeak < 0:
		rows = append(rows, row{"server RSS, " + flood, "not measured", rssTarget, "—"})
	default:
		rows = append(rows, row{"server RSS before → at peak, " + flood,
			fmt.Sprintf("%s → %s (+%s)", fmtBytes(r.rssBefore), fmtBytes(r.rssPeak), fmtBytes(max(r.rssPeak-r.rssBefore, 0))),
			rssTarget, verdict(r.rssPeak-r.rssBefore <= targetSigninRSSGrowth)})
	}
	measured := fmt.Sprintf("%s (%s posted)", statusCounts(r.answers), fmtInt(r.posted))
	rows = append(rows, row{"sign-in answers by status", measured + failureNote(r.failures, r.firstErr),
		"401, or 503 / 429 with Retry-After", verdict(r.posted > 0 && r.failures == 0)})
	if limit := signinLimit(r.target); limit > 0 && len(r.checked) > 0 {
		counts := make([]string, len(r.checked))
		for i, n := range r.checked {
			counts[i] = strconv.Itoa(n)
		}
		rows = append(rows, row{fmt.Sprintf("passwords checked (401) a round, %d wrong-password sign-ins at once%s", r.n, targetText(r.target)),
			strings.Join(counts, ", "), fmt.Sprintf("≤ %d a round", limit), verdict(slices.Max(r.checked) <= limit)})
	}
	if r.latency.n > 0 {
		rows = append(rows, row{"sign-in answer p50 / p99 (max)",
			fmt.Sprintf("%s / %s (%s), %s answers", fmtDur(r.latency.p50), fmtDur(r.latency.p99), fmtDur(r.latency.max), fmtInt(r.latency.n)),
			"— (a 503 comes after 2 s)", "—"})
	}
	return rows
}

// roundsText is "1 round" or "n rounds".
func (r *signinResult) roundsText() string {
	if r.rounds == 1 {
		return "1 round"
	}
	return fmt.Sprintf("%d rounds", r.rounds)
}
