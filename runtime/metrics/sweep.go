package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/turnstile-dev/turnstile/runtime"
)

// The sweeper counts what it deletes here.
var _ runtime.SweepMetrics = (*Metrics)(nil)

// newSweepCounter registers turnstile_expired_deleted_total with a series
// per kind at 0.
func newSweepCounter(reg *prometheus.Registry) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "turnstile_expired_deleted_total",
		Help: "Rows this process's workers deleted because they can never be used again, by kind: token (API tokens expired or revoked), session (sign-in sessions expired), change (the live feed's change log past its retention), run_token (run credentials expired)."},
		[]string{"kind"})
	for _, k := range []string{runtime.SweptToken, runtime.SweptSession, runtime.SweptChange, runtime.SweptRunToken} {
		c.WithLabelValues(k)
	}
	reg.MustRegister(c)
	return c
}

// Swept counts n rows of a kind ("token", "session") a sweep deleted. It
// implements runtime.SweepMetrics.
func (m *Metrics) Swept(kind string, n int) {
	if m != nil {
		m.swept.WithLabelValues(kind).Add(float64(n))
	}
}
