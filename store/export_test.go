package store

// ExpiredPausesQuery is the sweep's query, for a test to EXPLAIN.
const ExpiredPausesQuery = expiredPausesQuery
