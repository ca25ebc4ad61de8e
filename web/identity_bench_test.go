package web_test

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/turnstile-dev/turnstile/runtime"
	"github.com/turnstile-dev/turnstile/web"
)

// BenchmarkIntrospectAt1000PerSecond sends introspections of a live run
// credential at 1,000 a second (an open loop: each is sent on its tick,
// whatever the earlier ones are doing), with the caller's API token, over
// HTTP to the whole router on the test database, and reports the
// latencies' p50 and p99 and the rate reached. b.N is the number of
// calls; -benchtime 5000x is five seconds of load.
func BenchmarkIntrospectAt1000PerSecond(b *testing.B) {
	// The calls come from one user's token: without a bound on what one
	// user may have open at once (--max-user-requests 0), so that what is
	// measured is introspection, not 429s.
	a := newApp(b, 0, func(d *web.Deps) { d.MaxUserRequests = -1 })
	ctx := context.Background()
	out, _ := a.Waiting(b, "refund")
	if _, err := a.DB.Exec(`UPDATE runs SET status = 'running', claimed_by = 'holder',
		lease_expires_at = NOW(6) + INTERVAL 1 HOUR WHERE id = ?`, out.RunID); err != nil {
		b.Fatal(err)
	}
	live, err := a.Store.MintRunToken(ctx, out.RunID, a.Users["owner"].ID, "holder", time.Hour)
	if err != nil {
		b.Fatal(err)
	}
	caller, _ := a.token(b, "admin", runtime.ScopeIdentityIntrospect)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}, Timeout: 10 * time.Second}
	body := url.Values{"token": {live}}.Encode()
	call := func() (time.Duration, bool) {
		req, _ := http.NewRequest("POST", a.srv.URL+"/api/identity/introspect", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Authorization", "Bearer "+caller)
		start := time.Now()
		resp, err := client.Do(req)
		if err != nil {
			return 0, false
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return time.Since(start), resp.StatusCode == http.StatusOK && strings.Contains(string(b), `"active":true`)
	}
	for range 50 { // warm the pool
		call()
	}
	lat := make([]time.Duration, b.N)
	failed := 0
	var mu sync.Mutex
	var wg sync.WaitGroup
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	b.ResetTimer()
	start := time.Now()
	for i := range b.N {
		<-tick.C
		wg.Go(func() {
			d, ok := call()
			mu.Lock()
			lat[i] = d
			if !ok {
				failed++
			}
			mu.Unlock()
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	if failed > 0 {
		b.Fatalf("%d of %d introspections failed", failed, b.N)
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "calls/s")
}
