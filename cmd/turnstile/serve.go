package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/alexedwards/scs/mysqlstore"
	"github.com/alexedwards/scs/v2"

	"github.com/turnstile-dev/turnstile/store"
	"github.com/turnstile-dev/turnstile/web"
)

// writeTimeout bounds writing a response, or one line of a stream.
const writeTimeout = 30 * time.Second

// serve migrates the database and serves HTTP until ctx ends, then shuts
// down gracefully within --shutdown-timeout.
func serve(ctx context.Context, args []string, e env) error {
	fs := newFlagSet("serve", e)
	var d dbFlags
	d.register(fs)
	addr := fs.String("addr", "127.0.0.1:8080", "address to listen on")
	demo := fs.Bool("demo", false, "seed the demo configurations, users, orders and a few waiting runs when absent")
	shutdownTimeout := fs.Duration("shutdown-timeout", 25*time.Second, "how long a shutdown waits for requests in flight")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	keepalive := fs.Duration("keepalive", web.DefaultKeepalive, "longest silence of a stream before a keepalive line")
	var secureCookies autoBool
	fs.Var(&secureCookies, "secure-cookies", "mark the session and sign-in cookies Secure and send Strict-Transport-Security (served over HTTPS); auto: on when --public-url is https")
	workers := fs.Int("workers", 2, "embedded worker loops (0 turns them off)")
	decisionPath := fs.String("decision-path", web.PathAuto, "auto, request or durable: where a decision's continuation runs")
	maxContinuations := fs.Int("max-continuations", 512, "most continuations running inside requests at once")
	maxUserRequests := fs.Int("max-user-requests", web.DefaultMaxUserRequests, "most API requests one user may have open at once in this process, streams apart (0: no limit)")
	maxUserStreams := fs.Int("max-user-streams", web.DefaultMaxUserStreams, "most streams (event streams, NDJSON answers) one user may have open at once in this process (0: no limit)")
	trusted := fs.String("trusted-proxies", "", "comma-separated addresses or CIDR ranges of reverse proxies whose X-Forwarded-For names the client (for counting failed sign-ins per address)")
	accessLog := fs.Bool("access-log", true, "log one line per request: method, path without the query, status, bytes, duration, request id (X-Request-Id), peer address")
	if err := fs.parse(args); err != nil {
		return err
	}
	// The demo's receivers, if someone adds one, run on this machine.
	if *demo && !given(fs, "webhook-allow-private") {
		d.webhookAllowPrivate = true
	}
	// Behind HTTPS the cookies must not travel over plain HTTP, and
	// browsers are told to come back over HTTPS only.
	https := strings.HasPrefix(strings.ToLower(strings.TrimSpace(d.publicURL)), "https://")
	secure := secureCookies.or(https)
	hsts := https || secure
	proxies, err := parsePrefixes(*trusted)
	if err != nil {
		return fmt.Errorf("--trusted-proxies: %w", err)
	}
	log, err := newLogger(e.stderr, *logLevel)
	if err != nil {
		return err
	}
	d.publicDefault = defaultPublicURL(*addr)
	var orders *demoOrdersServer
	if *demo {
		// The demo's orders-agent reaches the example orders server,
		// which runs beside this process, through DEMO_ORDERS_URL.
		if orders, err = listenDemoOrders(); err != nil {
			return err
		}
		defer orders.ln.Close()
		d.getenv = orders.getenv(d.getenv)
	}
	a, err := open(ctx, d, log)
	if err != nil {
		return err
	}
	defer a.close()
	if *demo {
		if err := seedDemo(ctx, a, e.stdout); err != nil {
			return err
		}
		if err := orders.start(ctx, a, defaultPublicURL(*addr)); err != nil {
			return err
		}
	}
	if *keepalive <= 0 {
		return errors.New("--keepalive must be positive")
	}
	switch *decisionPath {
	case web.PathAuto, web.PathRequest, web.PathDurable:
	default:
		return fmt.Errorf("--decision-path must be auto, request or durable, not %q", *decisionPath)
	}
	if *maxContinuations < 1 || *workers < 0 {
		return errors.New("--max-continuations must be at least 1 and --workers at least 0")
	}
	if *maxUserRequests < 0 || *maxUserStreams < 0 {
		return errors.New("--max-user-requests and --max-user-streams must be at least 0 (0: no limit)")
	}
	noLimit := func(n int) int {
		if n == 0 {
			return -1
		}
		return n
	}
	warnFileLimit(log, *maxContinuations)
	sessions := scs.New()
	// On a cluster a session made at sign-in through one node is read at
	// the next request, which a load balancer may send to an instance on
	// another node: the sessions' reads wait for the cluster's commits.
	sessionDB := a.db
	if a.synced != nil {
		sessionDB = a.synced
	}
	// No cleanup goroutine of scs's own (one unbounded DELETE): the
	// workers' sweeper deletes expired sessions, in bounded batches.
	sessions.Store = mysqlstore.NewWithCleanupInterval(sessionDB.DB, 0)
	sessions.Lifetime = 12 * time.Hour
	sessions.Cookie.Name = "turnstile_session"
	sessions.Cookie.HttpOnly = true
	sessions.Cookie.SameSite = http.SameSiteLaxMode
	sessions.Cookie.Secure = secure
	server := web.New(web.Deps{Logger: log, Ready: a.store, Engine: a.engine, Users: a.store, Tokens: a.store, Credentials: a.store, Catalog: a.store, Agents: agentFiles{a},
		Events: a.engine, Sessions: sessions, Keepalive: *keepalive, WriteTimeout: writeTimeout,
		DecisionPath: *decisionPath, MaxContinuations: *maxContinuations, Workers: a.store, Metrics: a.metrics,
		MaxUserRequests: noLimit(*maxUserRequests), MaxUserStreams: noLimit(*maxUserStreams),
		TrustedProxies: proxies, Webhooks: a.store, NotReady: store.NotReady, StrictTransportSecurity: hsts})
	if err := a.metrics.WatchSlots(server); err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	handler := server.Handler()
	if *accessLog {
		handler = web.AccessLog(log, handler)
	}
	srv := &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		// Streams extend their write deadline per line; everything else
		// must be written within this.
		WriteTimeout: writeTimeout,
		IdleTimeout:  2 * time.Minute,
		ErrorLog:     slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	log.Info("serving", "addr", ln.Addr().String())
	a.self = append(a.self, *addr, ln.Addr().String())
	stopWorkers := startWorkers(ctx, a, *workers)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	// Connections queue on the listener already, so the address works from
	// this line on, even with --addr :0.
	fmt.Fprintf(e.stdout, "Turnstile is ready: open %s\n", openURL(ln.Addr()))
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	// Stop accepting; every continuation in a request hands its run back
	// at its next step boundary (its stream ends with "settled"), and so do
	// the embedded workers; a worker elsewhere finishes the runs.
	log.Info("shutting down", "timeout", shutdownTimeout.String())
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), *shutdownTimeout)
	defer cancel()
	a.engine.Drain()
	var shutdownErr error
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		shutdownErr = err
	}
	stopWorkers(sctx)
	return shutdownErr
}

// warnFileLimit says at start when the open-file limit cannot hold a
// stream per continuation slot: beyond it, Accept fails with EMFILE and
// the listener backs off, so new requests stall instead of being refused.
// Go already raised the soft limit to the hard one; only the hard limit
// (ulimit -Hn, LimitNOFILE= in systemd) can give more.
func warnFileLimit(log *slog.Logger, maxContinuations int) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return
	}
	// Each continuation holds its client's socket; the pool, the listener
	// and the log take a few more.
	if need := uint64(maxContinuations) + 256; lim.Cur < need {
		log.Warn("the open-file limit is below what --max-continuations needs",
			"limit", lim.Cur, "max_continuations", maxContinuations, "need", need,
			"hint", "raise the hard limit: ulimit -n 65536, or LimitNOFILE=65536 under systemd")
	}
}

// openURL is the address to open in a browser on this machine: a listener
// on every interface (0.0.0.0, ::, which Linux serves for IPv4 too) is
// reached through 127.0.0.1.
func openURL(addr net.Addr) string {
	tcp, ok := addr.(*net.TCPAddr)
	if !ok {
		return "http://" + addr.String() + "/"
	}
	host := tcp.IP.String()
	if tcp.IP.IsUnspecified() {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, strconv.Itoa(tcp.Port)) + "/"
}

// parsePrefixes reads "10.0.0.0/8, 127.0.0.1" as ranges; a bare address
// is a range of one.
func parsePrefixes(list string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for item := range strings.SplitSeq(list, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		if p, err := netip.ParsePrefix(item); err == nil {
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(item)
		if err != nil {
			return nil, fmt.Errorf("%q is neither an address nor a CIDR range", item)
		}
		out = append(out, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
	}
	return out, nil
}

// given reports whether the flag was set, on the command line or through
// its environment variable.
func given(fs *flagSet, name string) bool {
	found := false
	fs.Visit(func(f *flag.Flag) { found = found || f.Name == name })
	return found
}
