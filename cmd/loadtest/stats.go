package main

import (
	"cmp"
	"math"
	"slices"
	"time"
)

// summary is the distribution of a set of durations.
type summary struct {
	n             int
	p50, p99, max time.Duration
}

// summarize sorts a copy of ds and returns its p50, p99 and maximum.
func summarize(ds []time.Duration) summary {
	if len(ds) == 0 {
		return summary{}
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return summary{n: len(s), p50: percentile(s, 50), p99: percentile(s, 99), max: s[len(s)-1]}
}

// percentile is the nearest-rank percentile of sorted values: the
// smallest value that at least p percent of the values do not exceed. It
// is always one of the values, never an interpolation; 0 for no values.
func percentile[T cmp.Ordered](sorted []T, p float64) T {
	if len(sorted) == 0 {
		var zero T
		return zero
	}
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	rank = min(max(rank, 1), len(sorted))
	return sorted[rank-1]
}

// median is the p50 of values, as percentile takes it, from a sorted copy;
// 0 for no values.
func median[T cmp.Ordered](values []T) T {
	s := slices.Clone(values)
	slices.Sort(s)
	return percentile(s, 50)
}
