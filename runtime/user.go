package runtime

import (
	"errors"
	"slices"
	"time"
)

// User is a person who signs in. Grants are stored comma-separated, so a
// grant never contains a comma.
type User struct {
	ID           int64     `db:"id" json:"id"`
	Name         string    `db:"name" json:"name"`
	Role         Role      `db:"role" json:"role"`
	Grants       []string  `db:"-" json:"grants"`
	PasswordHash string    `db:"password_hash" json:"-"`
	CreatedAt    time.Time `db:"created_at" json:"created_at"`
}

// Actor returns the user as the engine's Actor, with a copy of the grants.
func (u *User) Actor() Actor {
	return Actor{ID: u.ID, Name: u.Name, Role: u.Role, Grants: slices.Clone(u.Grants)}
}

// MaxUserNameBytes bounds a user name in bytes, whatever its characters:
// sign-in refuses a longer name before it counts or looks anything up, so
// no user may be made whose name could not sign in.
const MaxUserNameBytes = 256

// The scopes an API token may carry.
const (
	ScopeRunStart  = "run:start"
	ScopeRunRead   = "run:read"
	ScopeRunDecide = "run:decide"
	ScopeRunCancel = "run:cancel"
	// ScopeAgentsWrite lets an admin's token read, store and switch off
	// configurations over HTTP (PUT, GET and DELETE /api/agents/:identifier).
	ScopeAgentsWrite = "agents:write"
)

// AllScopes returns every scope a token may carry, in a fixed order.
func AllScopes() []string {
	return []string{ScopeRunStart, ScopeRunRead, ScopeRunDecide, ScopeRunCancel, ScopeAgentsWrite, ScopeIdentityIntrospect}
}

// ErrTokenInvalid is what authenticating a bearer token fails with for a
// token that is malformed, unknown, expired or revoked: the caller is told
// no more than that.
var ErrTokenInvalid = errors.New("invalid token")
