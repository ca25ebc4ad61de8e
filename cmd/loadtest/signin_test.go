package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestParseOptionsSignin(t *testing.T) {
	o, err := parse(t, map[string]string{"TURNSTILE_DSN": "root@tcp(127.0.0.1:3306)/t"})
	if err != nil {
		t.Fatal(err)
	}
	if o.signinN != 60 || o.signinRounds != 3 {
		t.Errorf("defaults: signin-n %d, signin-rounds %d; want 60, 3", o.signinN, o.signinRounds)
	}
	// Named, it runs last; alone, it needs no database and no token.
	o, err = parse(t, nil, "--phases", "signin,streams", "--token", "tst_x")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(o.phases, ","); got != "streams,signin" {
		t.Errorf("phases = %s, want streams,signin", got)
	}
	o, err = parse(t, nil, "--phases", "signin", "--signin-n", "8", "--signin-rounds", "1")
	if err != nil {
		t.Fatalf("--phases signin without --dsn or --token: %v", err)
	}
	if o.needsRuns() || o.signinN != 8 || o.signinRounds != 1 {
		t.Errorf("needsRuns %v, signin-n %d, signin-rounds %d; want false, 8, 1", o.needsRuns(), o.signinN, o.signinRounds)
	}
	if o.signinTarget != signinFlood {
		t.Errorf("signin-target %q by default, want %q", o.signinTarget, signinFlood)
	}
	// One name or one address a round needs an address a round, not one
	// an attempt.
	for _, target := range []string{signinOneName, signinOneAddr} {
		o, err = parse(t, nil, "--phases", "signin", "--signin-target", target, "--signin-n", "1000", "--signin-rounds", "65")
		if err != nil || o.signinTarget != target {
			t.Errorf("--signin-target %s: %v, target %q", target, err, o.signinTarget)
		}
	}
	if _, err := parse(t, nil, "--phases", "signin", "--signin-target", "both"); err == nil ||
		!strings.Contains(err.Error(), `--signin-target must be flood, name or address, not "both"`) {
		t.Errorf("--signin-target both: %v", err)
	}
}

func TestSigninAnswerError(t *testing.T) {
	tests := []struct {
		name       string
		status     int
		retryAfter string
		want       string // part of the error; "" for none
	}{
		{"wrong password", 401, "", ""},
		{"no check free, with Retry-After", 503, "2", ""},
		{"throttled, with Retry-After", 429, "300", ""},
		{"no check free, without Retry-After", 503, "", `answered 503 with Retry-After ""`},
		{"throttled, with a date", 429, "Wed, 21 Oct 2026 07:28:00 GMT", "not a number of seconds"},
		{"throttled, for no time", 429, "0", "not a number of seconds"},
		{"signed in", 303, "", "a wrong password signed in"},
		{"CSRF refused", 403, "", "answered 403, not 401, 503 or 429"},
		{"server error", 500, "", "answered 500"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := signinAnswerError(tt.status, tt.retryAfter)
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("signinAnswerError(%d, %q) = %v, want nil", tt.status, tt.retryAfter, err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("signinAnswerError(%d, %q) = %v, want an error containing %q", tt.status, tt.retryAfter, err, tt.want)
			}
		})
	}
}

func TestFloodAddrsAreDistinct(t *testing.T) {
	floodNet := netip.MustParsePrefix("10.77.0.0/16")
	seen := map[string]bool{}
	for k := range maxFloodAddrs {
		a := floodAddr(k)
		ip, err := netip.ParseAddr(a)
		if err != nil || !floodNet.Contains(ip) {
			t.Fatalf("floodAddr(%d) = %q, want an address of 10.77.0.0/16 (%v)", k, a, err)
		}
		if seen[a] {
			t.Fatalf("floodAddr(%d) = %q, made before", k, a)
		}
		seen[a] = true
	}
	if got := floodAddr(0); got != "10.77.0.1" {
		t.Errorf("floodAddr(0) = %s, want 10.77.0.1", got)
	}
}

func TestStatusCounts(t *testing.T) {
	got := statusCounts(map[int]int{500: 2, 401: 1170, 403: 1, 429: 3})
	if want := "401: 1,170, 503: 0, 429: 3, 403: 1, 500: 2"; got != want {
		t.Errorf("statusCounts = %q, want %q", got, want)
	}
	if got, want := statusCounts(nil), "401: 0, 503: 0, 429: 0"; got != want {
		t.Errorf("statusCounts(nil) = %q, want %q", got, want)
	}
}

func TestSigninRows(t *testing.T) {
	const flood = ", 60 wrong-password sign-ins at once, 3 rounds"
	ok := func() *signinResult {
		return &signinResult{n: 60, rounds: 3, posted: 180, answers: map[int]int{401: 170, 503: 10},
			latency: summary{n: 180, p50: ms(310), p99: ms(2004), max: ms(2010)}, rssBefore: 20 << 20, rssPeak: 150 << 20}
	}
	byName := func(s *signinResult) map[string]row {
		m := map[string]row{}
		for _, rw := range (&report{signin: s}).rows() {
			m[rw.measurement] = rw
		}
		return m
	}
	tests := []struct {
		name                 string
		change               func(*signinResult)
		measurement, verdict string
		measured             string // part of the row
	}{
		{"within the bound", func(*signinResult) {},
			"server RSS before → at peak" + flood, "pass", "20 MiB → 150 MiB (+130 MiB)"},
		{"exactly the bound", func(s *signinResult) { s.rssPeak = s.rssBefore + 256<<20 },
			"server RSS before → at peak" + flood, "pass", "+256 MiB"},
		{"over the bound", func(s *signinResult) { s.rssPeak = s.rssBefore + 256<<20 + 1 },
			"server RSS before → at peak" + flood, "**fail**", "20 MiB → 276 MiB"},
		{"RSS not read", func(s *signinResult) { s.rssBefore, s.rssPeak = -1, -1 },
			"server RSS" + flood, "—", "not measured"},
		{"nothing posted", func(s *signinResult) {
			s.posted, s.answers, s.failures, s.firstErr = 0, map[int]int{}, 60, "GET /login: refused"
		},
			"server RSS before → at peak" + flood, "**fail**", "no sign-in posted: GET /login: refused"},
		{"expected answers", func(*signinResult) {},
			"sign-in answers by status", "pass", "401: 170, 503: 10, 429: 0 (180 posted)"},
		{"a server error", func(s *signinResult) { s.answers[500], s.failures, s.firstErr = 1, 1, "answered 500" },
			"sign-in answers by status", "**fail**", "429: 0, 500: 1 (180 posted); **1 failed**, first: answered 500"},
		{"latency", func(*signinResult) {},
			"sign-in answer p50 / p99 (max)", "—", "310 ms / 2.00 s (2.01 s), 180 answers"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := ok()
			tt.change(s)
			rows := byName(s)
			got, found := rows[tt.measurement]
			if !found {
				t.Fatalf("no row %q; rows: %v", tt.measurement, rows)
			}
			if got.verdict != tt.verdict || !strings.Contains(got.measured, tt.measured) {
				t.Errorf("row %q = %q, %s; want %q in it, %s", tt.measurement, got.measured, got.verdict, tt.measured, tt.verdict)
			}
			if strings.HasPrefix(tt.measurement, "server RSS") && got.target != "peak − before ≤ 256 MiB" {
				t.Errorf("RSS row's target is %q", got.target)
			}
		})
	}
	for _, tt := range []struct {
		target  string
		checked []int
		label   string
		want    string
		verdict string
	}{
		{signinOneName, []int{5, 5, 5}, "passwords checked (401) a round, 60 wrong-password sign-ins at once for one name from one address", "5, 5, 5", "pass"},
		{signinOneName, []int{5, 6, 0}, "passwords checked (401) a round, 60 wrong-password sign-ins at once for one name from one address", "5, 6, 0", "**fail**"},
		{signinOneAddr, []int{20, 20, 19}, "passwords checked (401) a round, 60 wrong-password sign-ins at once from one address, a name each", "20, 20, 19", "pass"},
		{signinOneAddr, []int{21, 20, 20}, "passwords checked (401) a round, 60 wrong-password sign-ins at once from one address, a name each", "21, 20, 20", "**fail**"},
	} {
		s := ok()
		s.target, s.checked = tt.target, tt.checked
		rows := byName(s)
		got, found := rows[tt.label]
		if !found {
			t.Errorf("%s: no row %q; rows: %v", tt.target, tt.label, rows)
			continue
		}
		if got.measured != tt.want || got.verdict != tt.verdict || got.target != fmt.Sprintf("≤ %d a round", signinLimit(tt.target)) {
			t.Errorf("%s %v: row %q, %q, %s; want %q, %s", tt.target, tt.checked, got.measured, got.target, got.verdict, tt.want, tt.verdict)
		}
		if _, found := rows["server RSS before → at peak, 60 wrong-password sign-ins at once"+targetText(tt.target)+", 3 rounds"]; !found {
			t.Errorf("%s: the RSS row does not name the target; rows: %v", tt.target, rows)
		}
	}
	if _, found := byName(ok())["passwords checked (401) a round, 60 wrong-password sign-ins at once"]; found {
		t.Error("a checked row for a flood of names and addresses of their own")
	}

	one := byName(&signinResult{n: 1, rounds: 1, posted: 1, answers: map[int]int{}, rssBefore: -1, rssPeak: -1})
	if _, found := one["server RSS, 1 wrong-password sign-ins at once, 1 round"]; !found {
		t.Errorf("no RSS row for one round; rows: %v", one)
	}
	if _, found := one["sign-in answer p50 / p99 (max)"]; found {
		t.Error("a latency row without any answer")
	}
	var out strings.Builder
	s := ok()
	s.phaseTime, s.cpu = 3*time.Second, cpuSample{server: 9 * time.Second, db: -1}
	(&report{signin: s}).write(&out)
	if want := "- signin: 3 rounds of 60 wrong-password sign-ins at once, 180 posted in 3.00 s; answer max 2.01 s;" +
		" server CPU 9.00 s (50 ms per attempt)\n"; !strings.Contains(out.String(), want) {
		t.Errorf("report lacks %q:\n%s", want, out.String())
	}
}

// loginServer is a sign-in form whose POST answers by arrival within its
// round: the first 500, the second 503 with Retry-After, the third 429
// without, the others 401. It records what the phase must get right.
type loginServer struct {
	n, rounds int

	mu         sync.Mutex
	gets       int
	answered   int
	posts      int
	full       []chan struct{} // closed when a round's n posts all arrived
	formConn   map[string]string
	names      map[string]bool
	addrs      map[string]bool
	violations []string
}

func newLoginServer(n, rounds int) *loginServer {
	s := &loginServer{n: n, rounds: rounds, formConn: map[string]string{}, names: map[string]bool{}, addrs: map[string]bool{}}
	for range rounds {
		s.full = append(s.full, make(chan struct{}))
	}
	return s
}

func (s *loginServer) violate(format string, args ...any) {
	s.violations = append(s.violations, fmt.Sprintf(format, args...))
}

func (s *loginServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/login" {
		http.NotFound(w, r)
		return
	}
	if r.Method == http.MethodGet {
		s.mu.Lock()
		s.gets++
		token := fmt.Sprintf("token-%d", s.gets)
		s.formConn[token] = r.RemoteAddr
		s.mu.Unlock()
		http.SetCookie(w, &http.Cookie{Name: loginCSRFCookie, Value: token, Path: "/login", HttpOnly: true})
		fmt.Fprintf(w, `<form method="post" action="/login"><input type="hidden" name="csrf_token" value="%s"/></form>`, token)
		return
	}
	r.ParseForm()
	c, err := r.Cookie(loginCSRFCookie)
	if err != nil || c.Value != r.PostForm.Get("csrf_token") {
		w.WriteHeader(http.StatusForbidden)
		return
	}
	name, addr := r.PostForm.Get("username"), r.Header.Get("X-Forwarded-For")
	s.mu.Lock()
	k := s.posts
	s.posts++
	round := k / s.n
	if s.gets != (round+1)*s.n || s.answered != round*s.n {
		s.violate("post %d came with %d forms fetched and %d answered, want %d and %d",
			k, s.gets, s.answered, (round+1)*s.n, round*s.n)
	}
	if s.formConn[c.Value] != r.RemoteAddr {
		s.violate("post %d came on another connection than its form", k)
	}
	if s.names[name] || s.addrs[addr] || r.PostForm.Get("password") == "" {
		s.violate("post %d: name %q, address %q again, or no password", k, name, addr)
	}
	s.names[name], s.addrs[addr] = true, true
	if s.posts == (round+1)*s.n {
		close(s.full[round])
	}
	s.mu.Unlock()
	select {
	case <-s.full[round]:
	case <-time.After(5 * time.Second):
		s.mu.Lock()
		s.violate("round %d's posts were not in flight together", round)
		s.mu.Unlock()
	}
	switch k % s.n {
	case 0:
		w.WriteHeader(http.StatusInternalServerError)
	case 1:
		w.Header().Set("Retry-After", "2")
		w.WriteHeader(http.StatusServiceUnavailable)
	case 2:
		w.WriteHeader(http.StatusTooManyRequests)
	default:
		w.WriteHeader(http.StatusUnauthorized)
	}
	fmt.Fprint(w, "<p>The name or the password is wrong.</p>")
	s.mu.Lock()
	s.answered++
	s.mu.Unlock()
}

// TestSigninPhase runs the phase against a fake sign-in: every round's
// forms come first, its posts all at once, each on its form's connection
// with a name and an address of its own, and the next round only after
// the last one's answers.
func TestSigninPhase(t *testing.T) {
	const n, rounds = 6, 2
	fake := newLoginServer(n, rounds)
	srv := httptest.NewServer(fake)
	defer srv.Close()
	base, _ := url.Parse(srv.URL)
	l := &loadtest{o: &options{url: base, signinN: n, signinRounds: rounds, setupConcurrency: 4, sampleEvery: time.Second},
		stderr: io.Discard}

	res := l.signinPhase(context.Background())
	for _, v := range fake.violations {
		t.Error(v)
	}
	if res.posted != n*rounds || res.latency.n != n*rounds {
		t.Errorf("%d posted, %d answers timed; want %d", res.posted, res.latency.n, n*rounds)
	}
	if got, want := statusCounts(res.answers), "401: 6, 503: 2, 429: 2, 500: 2"; got != want {
		t.Errorf("answers %s, want %s", got, want)
	}
	// The 500s and the 429s without Retry-After.
	if res.failures != 4 || !strings.Contains(res.firstErr, "POST /login: answered") {
		t.Errorf("%d failures, first %q; want 4", res.failures, res.firstErr)
	}
	for name := range fake.names {
		if !strings.HasPrefix(name, "loadtest-flood-") {
			t.Errorf("name %q", name)
		}
	}
	if len(fake.names) != n*rounds || len(fake.addrs) != n*rounds {
		t.Errorf("%d names, %d addresses; want %d of each", len(fake.names), len(fake.addrs), n*rounds)
	}
	if res.rssBefore != -1 || res.rssPeak != -1 {
		t.Errorf("RSS %d → %d without a server process, want -1 → -1", res.rssBefore, res.rssPeak)
	}
}

func TestSigninPhaseWithoutAForm(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			t.Error("posted without a CSRF token")
		}
		fmt.Fprint(w, "<p>no form here</p>")
	}))
	defer srv.Close()
	base, _ := url.Parse(srv.URL)
	l := &loadtest{o: &options{url: base, signinN: 3, signinRounds: 1, setupConcurrency: 2, sampleEvery: time.Second},
		stderr: io.Discard}
	res := l.signinPhase(context.Background())
	if res.posted != 0 || res.failures != 3 || !strings.Contains(res.firstErr, "GET /login: the form has no csrf_token field") {
		t.Errorf("%d posted, %d failures, first %q; want 0, 3 and the missing field", res.posted, res.failures, res.firstErr)
	}
	if got := res.rows()[0]; got.verdict != "**fail**" {
		t.Errorf("first row %q, %s; want a failure", got.measured, got.verdict)
	}
}

// limitServer is a sign-in form whose POST answers 401 to the first
// checked posts of each round of n, and 429 with Retry-After to the others;
// it records each round's names and addresses.
type limitServer struct {
	n, checked int

	mu     sync.Mutex
	gets   int
	posts  int
	names  []map[string]bool // by round
	addrs  []map[string]bool
	tokens map[string]bool
}

func (s *limitServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r.Method == http.MethodGet {
		s.gets++
		token := fmt.Sprintf("token-%d", s.gets)
		s.tokens[token] = true
		http.SetCookie(w, &http.Cookie{Name: loginCSRFCookie, Value: token, Path: "/login"})
		fmt.Fprintf(w, `<input type="hidden" name="csrf_token" value="%s"/>`, token)
		return
	}
	r.ParseForm()
	if c, err := r.Cookie(loginCSRFCookie); err != nil || !s.tokens[c.Value] || c.Value != r.PostForm.Get("csrf_token") {
		w.WriteHeader(http.StatusForbidden)
		return
	}
	round := s.posts / s.n
	for len(s.names) <= round {
		s.names, s.addrs = append(s.names, map[string]bool{}), append(s.addrs, map[string]bool{})
	}
	s.names[round][r.PostForm.Get("username")] = true
	s.addrs[round][r.Header.Get("X-Forwarded-For")] = true
	k := s.posts % s.n
	s.posts++
	if k < s.checked {
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	w.Header().Set("Retry-After", "1")
	w.WriteHeader(http.StatusTooManyRequests)
}

// TestSigninPhaseForOneNameOrOneAddress: with --signin-target name every
// attempt of a round is for one name from one address, with address one
// address sends a name each; each round has a name and an address of its
// own, and the phase counts the passwords checked (401) in each.
func TestSigninPhaseForOneNameOrOneAddress(t *testing.T) {
	const n, rounds = 6, 3
	for _, tt := range []struct {
		target       string
		names, addrs int // a round's distinct ones
	}{
		{signinOneName, 1, 1},
		{signinOneAddr, n, 1},
		{signinFlood, n, n},
	} {
		t.Run(tt.target, func(t *testing.T) {
			fake := &limitServer{n: n, checked: 2, tokens: map[string]bool{}}
			srv := httptest.NewServer(fake)
			defer srv.Close()
			base, _ := url.Parse(srv.URL)
			l := &loadtest{o: &options{url: base, signinN: n, signinRounds: rounds, signinTarget: tt.target, setupConcurrency: 4,
				sampleEvery: time.Second}, stderr: io.Discard}
			res := l.signinPhase(context.Background())
			if res.failures != 0 || res.posted != n*rounds {
				t.Fatalf("%d posted, %d failures (first %q); want %d and none", res.posted, res.failures, res.firstErr, n*rounds)
			}
			if got := fmt.Sprint(res.checked); got != "[2 2 2]" {
				t.Errorf("checked a round: %s, want [2 2 2]", got)
			}
			allNames, allAddrs := map[string]bool{}, map[string]bool{}
			for r := range rounds {
				if len(fake.names[r]) != tt.names || len(fake.addrs[r]) != tt.addrs {
					t.Errorf("round %d: %d names, %d addresses; want %d and %d", r, len(fake.names[r]), len(fake.addrs[r]), tt.names, tt.addrs)
				}
				for k := range fake.names[r] {
					allNames[k] = true
				}
				for k := range fake.addrs[r] {
					allAddrs[k] = true
				}
			}
			if len(allNames) != rounds*tt.names || len(allAddrs) != rounds*tt.addrs {
				t.Errorf("%d names and %d addresses in all, want %d and %d (none shared between rounds)",
					len(allNames), len(allAddrs), rounds*tt.names, rounds*tt.addrs)
			}
		})
	}
}
