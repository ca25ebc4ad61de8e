package web

import (
	"fmt"

	"github.com/alexedwards/argon2id"
)

// HashPassword returns the argon2id hash of a password, as stored.
func HashPassword(password string) (string, error) {
	h, err := argon2id.CreateHash(password, argon2id.DefaultParams)
	if err != nil {
		return "", fmt.Errorf("web: hash password: %w", err)
	}
	return h, nil
}

// dummyHash is compared against when the user does not exist, so that a
// wrong name takes as long as a wrong password.
var dummyHash, _ = HashPassword("no such user")

// checkPassword reports whether password matches hash; an empty or
// malformed hash matches nothing.
func checkPassword(hash, password string) bool {
	if hash == "" {
		hash = dummyHash
		password += "\x00" // never matches the dummy
	}
	ok, err := argon2id.ComparePasswordAndHash(password, hash)
	return err == nil && ok
}
