package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/turnstile-dev/turnstile/runtime"
)

// ErrDuplicate is wrapped by errors for a row whose unique key is taken,
// such as a user name that exists already.
var ErrDuplicate = errors.New("already exists")

// Column limits of the users table.
const (
	maxUserNameLength = 100  // users.name VARCHAR(100)
	maxGrantsLength   = 1000 // users.grants VARCHAR(1000)
)

// userRow is one row of users: the user and the stored form of its grants.
type userRow struct {
	runtime.User
	GrantsCSV string `db:"grants"`
}

func (r userRow) user() runtime.User {
	u := r.User
	u.Grants = splitGrants(r.GrantsCSV)
	return u
}

func splitGrants(csv string) []string {
	if csv == "" {
		return nil
	}
	return strings.Split(csv, ",")
}

// normalizeGrants trims the grants, drops empty and repeated ones, and
// rejects what the comma-separated column cannot hold.
func normalizeGrants(grants []string) ([]string, error) {
	var out []string
	for _, g := range grants {
		g = strings.TrimSpace(g)
		if g == "" || slices.Contains(out, g) {
			continue
		}
		if strings.Contains(g, ",") {
			return nil, fmt.Errorf("grant %q contains a comma", g)
		}
		out = append(out, g)
	}
	if n := len(strings.Join(out, ",")); n > maxGrantsLength {
		return nil, fmt.Errorf("grants take %d bytes, more than %d", n, maxGrantsLength)
	}
	return out, nil
}

// CreateUser inserts a user and sets its ID, its normalized grants, its
// role (user when empty) and, when zero, its CreatedAt. An invalid name,
// role or grant is an error; a name that exists already is an error
// wrapping ErrDuplicate.
func (s *Store) CreateUser(ctx context.Context, u *runtime.User) error {
	const q = `INSERT INTO users (name, role, grants, password_hash, created_at)
		VALUES (?, ?, ?, ?, ?)`
	if u.Name == "" || strings.TrimSpace(u.Name) != u.Name {
		return fmt.Errorf("store: create user %q: a name must be non-empty, without surrounding spaces", u.Name)
	}
	if n := utf8.RuneCountInString(u.Name); n > maxUserNameLength {
		return fmt.Errorf("store: create user %q: a name has at most %d characters, not %d", u.Name, maxUserNameLength, n)
	}
	if n := len(u.Name); n > runtime.MaxUserNameBytes {
		return fmt.Errorf("store: create user %q: a name has at most %d bytes (sign-in takes no longer), not %d", u.Name, runtime.MaxUserNameBytes, n)
	}
	switch u.Role {
	case "":
		u.Role = runtime.RoleUser
	case runtime.RoleAdmin, runtime.RoleUser:
	default:
		return fmt.Errorf("store: create user %q: role must be %s or %s, not %q", u.Name, runtime.RoleAdmin, runtime.RoleUser, u.Role)
	}
	grants, err := normalizeGrants(u.Grants)
	if err != nil {
		return fmt.Errorf("store: create user %q: %w", u.Name, err)
	}
	u.Grants = grants
	if u.CreatedAt.IsZero() {
		// DATETIME(6) keeps microseconds; truncating here makes the struct
		// equal to what a later read returns.
		u.CreatedAt = time.Now().UTC().Truncate(time.Microsecond)
	}
	res, err := s.db.ExecContext(ctx, q, u.Name, u.Role, strings.Join(grants, ","), u.PasswordHash, u.CreatedAt)
	if err != nil {
		if isDuplicate(err) {
			return fmt.Errorf("store: create user %q: %w", u.Name, ErrDuplicate)
		}
		return fmt.Errorf("store: create user %q: %w", u.Name, err)
	}
	id, err := res.LastInsertId()
	if err != nil {
		return fmt.Errorf("store: create user %q: %w", u.Name, err)
	}
	u.ID = id
	return nil
}

// UserByName returns the user with this name (compared exactly, case
// included), or an error wrapping runtime.ErrNotFound.
func (s *Store) UserByName(ctx context.Context, name string) (*runtime.User, error) {
	const q = `SELECT id, name, role, grants, password_hash, created_at FROM users WHERE name = ?`
	var r userRow
	if err := s.db.GetContext(ctx, &r, q, name); err != nil {
		return nil, notFound(fmt.Sprintf("user %q", name), err)
	}
	u := r.user()
	return &u, nil
}

// User returns the user with this id, or an error wrapping runtime.ErrNotFound.
func (s *Store) User(ctx context.Context, id int64) (*runtime.User, error) {
	const q = `SELECT id, name, role, grants, password_hash, created_at FROM users WHERE id = ?`
	var r userRow
	if err := s.db.GetContext(ctx, &r, q, id); err != nil {
		return nil, notFound(fmt.Sprintf("user %d", id), err)
	}
	u := r.user()
	return &u, nil
}

// ListUsers returns every user ordered by name; an empty slice when there
// are none.
func (s *Store) ListUsers(ctx context.Context) ([]runtime.User, error) {
	const q = `SELECT id, name, role, grants, password_hash, created_at FROM users ORDER BY name`
	var rows []userRow
	if err := s.db.SelectContext(ctx, &rows, q); err != nil {
		return nil, fmt.Errorf("store: list users: %w", err)
	}
	users := make([]runtime.User, len(rows))
	for i, r := range rows {
		users[i] = r.user()
	}
	return users, nil
}

// SetPassword replaces a user's password hash.
func (s *Store) SetPassword(ctx context.Context, id int64, hash string) error {
	res, err := s.db.ExecContext(ctx, `UPDATE users SET password_hash = ? WHERE id = ?`, hash, id)
	if err := oneRow(res, err, runtime.ErrNotFound); err != nil {
		return fmt.Errorf("store: set password of user %d: %w", id, err)
	}
	return nil
}
