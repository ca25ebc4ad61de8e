package store

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/turnstile-dev/turnstile/runtime"
)

// TokenCache answers Authenticate from memory for a token this process
// saw valid less than its ttl ago: an integrator's concurrent requests
// with one token then cost one lookup a ttl instead of one each, a round
// trip off every API request (the durable decision's first of three).
//
// What it costs is staleness, bounded by ttl: a token revoked (turnstile
// token revoke, from any process), a user deleted, or a user's grants or
// role changed take effect on a serving process within ttl, not at once.
// Nothing else is cached: an unknown, expired or revoked token is looked
// up every time (a guesser fills no memory), and an entry never outlives
// half of the token's remaining life, so a token's expiry is never
// stretched and a short-lived token in steady use still slides.
type TokenCache struct {
	s   *Store
	ttl time.Duration
	max int

	mu      sync.Mutex
	entries map[string]cachedToken // by the token's hash
}

type cachedToken struct {
	user   *runtime.User
	scopes []string
	until  time.Time
}

// maxCachedTokens bounds the cache; past it, it starts again empty.
const maxCachedTokens = 10000

// CachedTokens returns a TokenCache over the store; ttl ≤ 0 caches
// nothing.
func (s *Store) CachedTokens(ttl time.Duration) *TokenCache {
	return &TokenCache{s: s, ttl: ttl, max: maxCachedTokens, entries: map[string]cachedToken{}}
}

// Authenticate is Store.Authenticate, answered from the cache when it
// holds the token (see TokenCache for what that may miss). The user
// returned is the caller's own copy.
func (c *TokenCache) Authenticate(ctx context.Context, plain string) (*runtime.User, []string, error) {
	hash, ok := hashToken(plain)
	if !ok {
		return nil, nil, runtime.ErrTokenInvalid
	}
	now := time.Now()
	c.mu.Lock()
	e, hit := c.entries[hash]
	c.mu.Unlock()
	if hit && now.Before(e.until) {
		u := *e.user
		u.Grants = slices.Clone(u.Grants)
		return &u, slices.Clone(e.scopes), nil
	}
	u, scopes, expires, err := c.s.authenticate(ctx, hash)
	if err != nil || c.ttl <= 0 {
		return u, scopes, err
	}
	life := min(c.ttl, expires.Sub(now)/2)
	c.mu.Lock()
	if len(c.entries) >= c.max {
		clear(c.entries)
	}
	stored := *u
	stored.Grants = slices.Clone(u.Grants)
	c.entries[hash] = cachedToken{user: &stored, scopes: slices.Clone(scopes), until: now.Add(life)}
	c.mu.Unlock()
	return u, scopes, nil
}
