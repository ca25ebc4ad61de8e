package web

import (
	"fmt"

	"github.com/alexedwards/argon2id"
)

// passwordParams are the argon2id parameters of new hashes: 19 MiB, two
// passes, one lane — OWASP's smallest recommended argon2id setting, and
// ~25 ms on this project's machines. argon2id.DefaultParams take 64 MiB
// per check, which let a flood of wrong passwords take gigabytes; with
// these and at most maxPasswordChecks checks at once, sign-in costs at
// most ~76 MiB. Hashes made with other parameters still verify (their
// parameters are in the hash) and are made again with these at the next
// sign-in.
var passwordParams = &argon2id.Params{Memory: 19 * 1024, Iterations: 2, Parallelism: 1, SaltLength: 16, KeyLength: 32}

// HashPassword returns the argon2id hash of a password, as stored.
func HashPassword(password string) (string, error) {
	h, err := argon2id.CreateHash(password, passwordParams)
	if err != nil {
		return "", fmt.Errorf("web: hash password: %w", err)
	}
	return h, nil
}

// dummyHash is compared against when the user does not exist, so that a
// wrong name takes as long as a wrong password.
var dummyHash, _ = HashPassword("no such user")

// checkPassword reports whether password matches hash, and whether the
// hash should be made again with passwordParams; an empty or malformed
// hash matches nothing.
func checkPassword(hash, password string) (ok, stale bool) {
	if hash == "" {
		hash = dummyHash
		password += "\x00" // never matches the dummy
	}
	ok, params, err := argon2id.CheckHash(password, hash)
	if err != nil || !ok {
		return false, false
	}
	return true, *params != *passwordParams
}
