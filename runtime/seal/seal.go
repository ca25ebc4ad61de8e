// Package seal encrypts run content at rest: a Keyring is a runtime.Sealer
// that seals every suspended state and transcript message with AES-GCM
// under the first of its keys and opens blobs sealed under any of them, so
// keys can be rotated by putting a new one in front.
//
// A sealed blob is
//
//	"tse1:" key-id ":" nonce(12 bytes) ciphertext-and-tag
//
// The header is ASCII and names the key, so an operator can find the runs
// still sealed under an old key before dropping it
// (SELECT id FROM runs WHERE state LIKE 'tse1:old:%'); the header is the
// AEAD's additional data, so it cannot be edited without the blob failing
// to open.
//
// Migration rule: a blob that starts with '{' is plain JSON written before
// keys were configured, and Open returns it as it is. Both the state and a
// message are JSON objects, and a sealed blob never starts with '{', so the
// two cannot be confused. Such blobs stay plain until the run writes them
// again.
package seal

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/turnstile-dev/turnstile/runtime"
)

// prefix starts every sealed blob; the 1 is the format's version.
const prefix = "tse1:"

// maxIDLen bounds a key id.
const maxIDLen = 32

var idPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,32}$`)

// Errors of Open. Both mean the blob cannot be read with these keys; the
// engine refuses such a run with unreadable_state.
var (
	// ErrUnknownKey: the blob names a key the keyring does not hold. It is
	// runtime.ErrKeyMissing, so that the engine leaves such a run for a
	// process that holds the key rather than settling it as unreadable.
	ErrUnknownKey = runtime.ErrKeyMissing
	// ErrCorrupt: the blob is neither sealed nor plain JSON, or it does not
	// authenticate (altered, truncated, or sealed by another key of the
	// same id).
	ErrCorrupt = errors.New("seal: corrupt blob")
)

var _ runtime.Sealer = (*Keyring)(nil)

// Keyring holds the keys that open sealed blobs; the first one seals. It
// is safe for concurrent use.
type Keyring struct {
	ids   []string
	aeads map[string]cipher.AEAD
}

// Parse reads a keyring from "id:base64key,id:base64key,…": ids of 1 to 32
// letters, digits, '-' or '_', each given once; keys of 16, 24 or 32 bytes
// (AES-128, -192, -256) in standard or URL base64, padded or not. Spaces
// around entries are ignored. The first key seals. Its errors name the
// entry by position and id and never contain key material.
func Parse(spec string) (*Keyring, error) {
	if strings.TrimSpace(spec) == "" {
		return nil, errors.New("seal: no keys given (want id:base64key[,id:base64key…])")
	}
	k := &Keyring{aeads: map[string]cipher.AEAD{}}
	for i, entry := range strings.Split(spec, ",") {
		n := i + 1
		entry = strings.TrimSpace(entry)
		if entry == "" {
			return nil, fmt.Errorf("seal: key %d is empty (want id:base64key[,id:base64key…])", n)
		}
		id, encoded, ok := strings.Cut(entry, ":")
		if !ok {
			return nil, fmt.Errorf("seal: key %d has no id (want id:base64key)", n)
		}
		id, encoded = strings.TrimSpace(id), strings.TrimSpace(encoded)
		if !idPattern.MatchString(id) {
			// The id may be key material pasted in the wrong place: say
			// what is wrong without repeating it.
			return nil, fmt.Errorf("seal: key %d: the id must be 1 to %d letters, digits, '-' or '_'", n, maxIDLen)
		}
		if _, dup := k.aeads[id]; dup {
			return nil, fmt.Errorf("seal: key %d: id %q is given twice", n, id)
		}
		raw, ok := decodeKey(encoded)
		if !ok {
			return nil, fmt.Errorf("seal: key %d (%s): not valid base64", n, id)
		}
		if l := len(raw); l != 16 && l != 24 && l != 32 {
			return nil, fmt.Errorf("seal: key %d (%s): %d bytes, want 16, 24 or 32", n, id, l)
		}
		block, err := aes.NewCipher(raw)
		if err != nil {
			return nil, fmt.Errorf("seal: key %d (%s): cannot be used for AES", n, id)
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, fmt.Errorf("seal: key %d (%s): cannot be used for AES-GCM", n, id)
		}
		k.ids = append(k.ids, id)
		k.aeads[id] = aead
	}
	return k, nil
}

func decodeKey(s string) ([]byte, bool) {
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(s); err == nil {
			return b, true
		}
	}
	return nil, false
}

// SealingKey returns the id of the key that seals.
func (k *Keyring) SealingKey() string { return k.ids[0] }

// Keys returns the ids of every key, the sealing one first.
func (k *Keyring) Keys() []string { return append([]string(nil), k.ids...) }

// Seal encrypts plain under the first key with a fresh random nonce. It
// fails only when the system's random source does.
func (k *Keyring) Seal(plain []byte) ([]byte, error) {
	id := k.ids[0]
	aead := k.aeads[id]
	header := []byte(prefix + id + ":")
	nonce := make([]byte, aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return nil, fmt.Errorf("seal: nonce: %w", err)
	}
	out := make([]byte, 0, len(header)+len(nonce)+len(plain)+aead.Overhead())
	out = append(append(out, header...), nonce...)
	return aead.Seal(out, nonce, plain, header), nil
}

// Open decrypts a sealed blob with the key it names, or returns a plain
// JSON blob (one starting with '{') as it is. It fails with an error
// wrapping ErrUnknownKey when the blob names a key the keyring lacks, and
// ErrCorrupt when the blob is neither or does not authenticate.
func (k *Keyring) Open(blob []byte) ([]byte, error) {
	if len(blob) > 0 && blob[0] == '{' {
		return blob, nil
	}
	id, ok := KeyID(blob)
	if !ok {
		return nil, fmt.Errorf("%w: neither sealed nor plain JSON", ErrCorrupt)
	}
	aead, ok := k.aeads[id]
	if !ok {
		return nil, fmt.Errorf("seal: key %q: %w (keys: %s)", id, ErrUnknownKey, strings.Join(k.ids, ","))
	}
	headerLen := len(prefix) + len(id) + 1
	rest := blob[headerLen:]
	if len(rest) < aead.NonceSize()+aead.Overhead() {
		return nil, fmt.Errorf("%w: sealed under %q but truncated", ErrCorrupt, id)
	}
	nonce, ciphertext := rest[:aead.NonceSize()], rest[aead.NonceSize():]
	plain, err := aead.Open(nil, nonce, ciphertext, blob[:headerLen])
	if err != nil {
		return nil, fmt.Errorf("%w: sealed under %q but does not authenticate", ErrCorrupt, id)
	}
	return plain, nil
}

// KeyID returns the id of the key a blob was sealed under, and false for a
// blob that is not sealed (plain JSON or anything else).
func KeyID(blob []byte) (string, bool) {
	if !bytes.HasPrefix(blob, []byte(prefix)) {
		return "", false
	}
	rest := blob[len(prefix):]
	end := bytes.IndexByte(rest[:min(len(rest), maxIDLen+1)], ':')
	if end < 1 || !idPattern.Match(rest[:end]) {
		return "", false
	}
	return string(rest[:end]), true
}
