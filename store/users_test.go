package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/turnstile-dev/turnstile/runtime"
	"github.com/turnstile-dev/turnstile/store"
)

// createUser creates a user for a test and fails the test when it cannot.
func createUser(t *testing.T, s *store.Store, u runtime.User) *runtime.User {
	t.Helper()
	if err := s.CreateUser(context.Background(), &u); err != nil {
		t.Fatalf("CreateUser(%q): %v", u.Name, err)
	}
	return &u
}

func sameUser(t *testing.T, got, want *runtime.User) {
	t.Helper()
	if got.ID != want.ID || got.Name != want.Name || got.Role != want.Role ||
		!slices.Equal(got.Grants, want.Grants) || got.PasswordHash != want.PasswordHash ||
		!got.CreatedAt.Equal(want.CreatedAt) {
		t.Errorf("user = %+v, want %+v", got, want)
	}
}

func TestCreateUserAndRead(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	tests := []struct {
		name       string
		in         runtime.User
		wantRole   runtime.Role
		wantGrants []string
	}{
		{name: "admin", in: runtime.User{Name: "ada", Role: runtime.RoleAdmin, PasswordHash: "$argon2id$x"}, wantRole: runtime.RoleAdmin},
		{name: "no grants", in: runtime.User{Name: "bob", Role: runtime.RoleUser}, wantRole: runtime.RoleUser},
		{name: "role defaults to user", in: runtime.User{Name: "cy"}, wantRole: runtime.RoleUser},
		{name: "grants", in: runtime.User{Name: "dee", Grants: []string{"approve", "refunds"}}, wantRole: runtime.RoleUser, wantGrants: []string{"approve", "refunds"}},
		{name: "grants normalized", in: runtime.User{Name: "eve", Grants: []string{" approve", "", "approve", "refunds "}}, wantRole: runtime.RoleUser, wantGrants: []string{"approve", "refunds"}},
		{name: "unicode name", in: runtime.User{Name: "Zoë Ångström"}, wantRole: runtime.RoleUser},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u := tt.in
			if err := s.CreateUser(ctx, &u); err != nil {
				t.Fatalf("CreateUser: %v", err)
			}
			if u.ID < 1 {
				t.Errorf("ID = %d, want it set", u.ID)
			}
			if u.Role != tt.wantRole {
				t.Errorf("Role = %q, want %q", u.Role, tt.wantRole)
			}
			if !slices.Equal(u.Grants, tt.wantGrants) {
				t.Errorf("Grants = %q, want %q", u.Grants, tt.wantGrants)
			}
			if time.Since(u.CreatedAt) > time.Minute || u.CreatedAt.After(time.Now()) {
				t.Errorf("CreatedAt = %v, want about now", u.CreatedAt)
			}
			byID, err := s.User(ctx, u.ID)
			if err != nil {
				t.Fatalf("User(%d): %v", u.ID, err)
			}
			sameUser(t, byID, &u)
			byName, err := s.UserByName(ctx, u.Name)
			if err != nil {
				t.Fatalf("UserByName(%q): %v", u.Name, err)
			}
			sameUser(t, byName, &u)
		})
	}
}

func TestCreateUserRefuses(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	createUser(t, s, runtime.User{Name: "taken"})
	tests := []struct {
		name    string
		in      runtime.User
		wantErr string
		wantIs  error
	}{
		{name: "duplicate name", in: runtime.User{Name: "taken"}, wantErr: `store: create user "taken": already exists`, wantIs: store.ErrDuplicate},
		{name: "empty name", in: runtime.User{}, wantErr: "a name must be non-empty"},
		{name: "padded name", in: runtime.User{Name: " taken"}, wantErr: "without surrounding spaces"},
		{name: "long name", in: runtime.User{Name: strings.Repeat("n", 101)}, wantErr: "at most 100 characters, not 101"},
		{name: "long name in bytes", in: runtime.User{Name: strings.Repeat("€", 86)}, wantErr: "at most 256 bytes (sign-in takes no longer), not 258"},
		{name: "unknown role", in: runtime.User{Name: "root", Role: "superuser"}, wantErr: `role must be admin or user, not "superuser"`},
		{name: "comma in grant", in: runtime.User{Name: "gus", Grants: []string{"a,b"}}, wantErr: `grant "a,b" contains a comma`},
		{name: "grants too long", in: runtime.User{Name: "hal", Grants: []string{strings.Repeat("g", 600), strings.Repeat("h", 600)}}, wantErr: "more than 1000"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u := tt.in
			err := s.CreateUser(ctx, &u)
			if err == nil {
				t.Fatalf("CreateUser(%+v) succeeded, want an error containing %q", tt.in, tt.wantErr)
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("error = %q, want it to contain %q", err, tt.wantErr)
			}
			if tt.wantIs != nil && !errors.Is(err, tt.wantIs) {
				t.Errorf("error = %v, want it to wrap %v", err, tt.wantIs)
			}
			if u.ID != 0 {
				t.Errorf("ID = %d after a failed create, want 0", u.ID)
			}
		})
	}
	users, err := s.ListUsers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(users), 1; got != want {
		t.Errorf("%d users after refused creates, want %d", got, want)
	}
}

func TestUserNotFound(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	createUser(t, s, runtime.User{Name: "Alice"})
	tests := []struct {
		name string
		get  func() (*runtime.User, error)
	}{
		{"unknown id", func() (*runtime.User, error) { return s.User(ctx, 9999) }},
		{"unknown name", func() (*runtime.User, error) { return s.UserByName(ctx, "nobody") }},
		{"names compare with case", func() (*runtime.User, error) { return s.UserByName(ctx, "alice") }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.get()
			if !errors.Is(err, runtime.ErrNotFound) {
				t.Errorf("error = %v, want runtime.ErrNotFound", err)
			}
			if got != nil {
				t.Errorf("user = %+v, want nil", got)
			}
		})
	}
}

func TestDeleteUser(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	gone := createUser(t, s, runtime.User{Name: "gone"})
	kept := createUser(t, s, runtime.User{Name: "kept"})
	if _, err := s.DeleteUser(ctx, runtime.UserDeletion{UserID: gone.ID}); err != nil {
		t.Fatalf("DeleteUser: %v", err)
	}
	if _, err := s.User(ctx, gone.ID); !errors.Is(err, runtime.ErrNotFound) {
		t.Errorf("User after delete: error = %v, want runtime.ErrNotFound", err)
	}
	if _, err := s.User(ctx, kept.ID); err != nil {
		t.Errorf("the other user: %v", err)
	}
	if _, err := s.DeleteUser(ctx, runtime.UserDeletion{UserID: gone.ID}); !errors.Is(err, runtime.ErrNotFound) {
		t.Errorf("second DeleteUser: error = %v, want runtime.ErrNotFound", err)
	}
	// The name is free again.
	again := createUser(t, s, runtime.User{Name: "gone"})
	if again.ID == gone.ID {
		t.Errorf("recreated user has the deleted user's id %d", again.ID)
	}
}

func TestListUsers(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	empty, err := s.ListUsers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if empty == nil || len(empty) != 0 {
		t.Errorf("ListUsers on no users = %#v, want an empty slice", empty)
	}
	carol := createUser(t, s, runtime.User{Name: "carol", Grants: []string{"approve"}})
	alice := createUser(t, s, runtime.User{Name: "alice", Role: runtime.RoleAdmin})
	bob := createUser(t, s, runtime.User{Name: "bob", PasswordHash: "h"})
	got, err := s.ListUsers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []*runtime.User{alice, bob, carol}
	if len(got) != len(want) {
		t.Fatalf("ListUsers returned %d users, want %d", len(got), len(want))
	}
	for i := range want {
		sameUser(t, &got[i], want[i])
	}
}

func TestUserActor(t *testing.T) {
	u := &runtime.User{ID: 4, Name: "dee", Role: runtime.RoleUser, Grants: []string{"approve", "refunds"}}
	got := u.Actor()
	want := runtime.Actor{ID: 4, Name: "dee", Role: runtime.RoleUser, Grants: []string{"approve", "refunds"}}
	if got.ID != want.ID || got.Name != want.Name || got.Role != want.Role || !slices.Equal(got.Grants, want.Grants) {
		t.Errorf("Actor() = %+v, want %+v", got, want)
	}
	if !got.Has("refunds") || got.Has("admin-only") {
		t.Errorf("Actor().Has disagrees with the grants %v", got.Grants)
	}
	got.Grants[0] = "changed"
	if u.Grants[0] != "approve" {
		t.Errorf("changing the actor's grants changed the user's: %v", u.Grants)
	}
}

// A user marshalled to JSON (the API, logs) never carries its password hash.
func TestUserJSONHidesPasswordHash(t *testing.T) {
	b, err := json.Marshal(runtime.User{Name: "x", PasswordHash: "$argon2id$secret"})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "secret") {
		t.Errorf("JSON %s contains the password hash", b)
	}
}
