// Package seal encrypts run content at rest: a Keyring is a runtime.Sealer
// that seals every piece of run content with AES-GCM under the first of
// its keys and opens blobs sealed under any of them, so keys can be
// rotated by putting a new one in front.
//
// A sealed blob is
//
//	"tse2:" key-id ":" nonce(12 bytes) ciphertext-and-tag
//
// The header is ASCII and names the key, so an operator can find the runs
// still sealed under an old key before dropping it
// (SELECT id FROM runs WHERE state LIKE 'tse2:old:%'). The AEAD's
// additional data is the header and the blob's place (runtime.Place: its
// table, column, run and row), so neither the header can be edited nor the
// blob moved to another row, column or run without it failing to open.
//
// Version 1 ("tse1:", written before blobs were bound to their place) has
// the header alone as additional data: such a blob still opens, anywhere,
// so that an upgrade locks nobody out, and the keyring logs once that
// state reseal should rebind it. Plain content (anything not sealed) is
// refused with runtime.ErrNotSealed: with keys set, content is sealed, and
// content stored before keys were set is sealed by state reseal.
package seal

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/turnstile-dev/turnstile/runtime"
)

// The prefixes of the format's versions: every blob Seal writes starts
// with prefix; prefixV1 blobs are only read (see the package comment).
const (
	prefix   = "tse2:"
	prefixV1 = "tse1:"
)

// maxIDLen bounds a key id.
const maxIDLen = 32

var idPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,32}$`)

// Errors of Open. Each means the blob cannot be read with these keys at
// this place; the engine refuses such a run with unreadable_state.
var (
	// ErrUnknownKey: the blob names a key the keyring does not hold. It is
	// runtime.ErrKeyMissing, so that the engine leaves such a run for a
	// process that holds the key rather than settling it as unreadable.
	ErrUnknownKey = runtime.ErrKeyMissing
	// ErrNotSealed: the blob is not sealed. It is runtime.ErrNotSealed,
	// so that the engine leaves such a run for state reseal.
	ErrNotSealed = runtime.ErrNotSealed
	// ErrCorrupt: the blob does not authenticate: altered, truncated,
	// sealed by another key of the same id, or sealed for another place.
	ErrCorrupt = errors.New("seal: corrupt blob")
)

var _ runtime.Sealer = (*Keyring)(nil)

// Keyring holds the keys that open sealed blobs; the first one seals. It
// is safe for concurrent use.
type Keyring struct {
	ids   []string
	aeads map[string]cipher.AEAD
	// log, when set, is told once of the first version 1 blob opened.
	log     *slog.Logger
	unbound sync.Once
	// v1 seals as version 1 did (see SealUnbound).
	v1 bool
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

// LogUnbound has the keyring log, once, the first blob of version 1 it
// opens: content bound to no place, which state reseal rebinds. It is
// called before the keyring is used.
func (k *Keyring) LogUnbound(log *slog.Logger) { k.log = log }

// SealUnbound has the keyring seal as version 1 did, bound to no place,
// which processes of the previous version open (they take a version 2
// blob for a corrupt one): for a rolling upgrade from that version, until
// every process runs this one. It is called before the keyring is used.
func (k *Keyring) SealUnbound() { k.v1 = true }

// Sealing reports the version of the blobs Seal writes: 2, or 1 after
// SealUnbound.
func (k *Keyring) Sealing() int {
	if k.v1 {
		return 1
	}
	return 2
}

// Seal encrypts plain under the first key with a fresh random nonce, bound
// to its place (unbound after SealUnbound). It fails when the place names no table, column or run (a
// caller that does not know where the blob goes), or when the system's
// random source does.
func (k *Keyring) Seal(plain []byte, at runtime.Place) ([]byte, error) {
	if at.Table == "" || at.Column == "" || at.RunID == 0 {
		return nil, fmt.Errorf("seal: no place to seal for (%s)", at)
	}
	id := k.ids[0]
	aead := k.aeads[id]
	header := []byte(prefix + id + ":")
	ad := additionalData(header, at)
	if k.v1 {
		header = []byte(prefixV1 + id + ":")
		ad = header
	}
	nonce := make([]byte, aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return nil, fmt.Errorf("seal: nonce: %w", err)
	}
	out := make([]byte, 0, len(header)+len(nonce)+len(plain)+aead.Overhead())
	out = append(append(out, header...), nonce...)
	return aead.Seal(out, nonce, plain, ad), nil
}

// additionalData is what a version 2 blob is authenticated with beside
// its ciphertext: its header and its place. Every field but the last is
// free of NUL bytes (identifiers and a decimal id), so the NUL-separated
// encoding names one place only.
func additionalData(header []byte, at runtime.Place) []byte {
	b := make([]byte, 0, len(header)+len(at.Table)+len(at.Column)+len(at.Row)+24)
	b = append(b, header...)
	b = append(append(b, at.Table...), 0)
	b = append(append(b, at.Column...), 0)
	b = append(strconv.AppendInt(b, at.RunID, 10), 0)
	return append(b, at.Row...)
}

// Open decrypts a blob sealed for this place with the key it names, or a
// version 1 blob (bound to no place) anywhere. It fails with an error
// wrapping ErrUnknownKey when the blob names a key the keyring lacks,
// ErrNotSealed when it is not sealed at all, and ErrCorrupt when it does
// not authenticate here.
func (k *Keyring) Open(blob []byte, at runtime.Place) ([]byte, error) {
	v, id, ok := parseHeader(blob)
	switch {
	case v == 0:
		return nil, fmt.Errorf("seal: %s: %w", at, ErrNotSealed)
	case !ok:
		return nil, fmt.Errorf("%w: %s: a sealed blob's header without a key id", ErrCorrupt, at)
	}
	aead, ok := k.aeads[id]
	if !ok {
		return nil, fmt.Errorf("seal: %s: key %q: %w (keys: %s)", at, id, ErrUnknownKey, strings.Join(k.ids, ","))
	}
	headerLen := len(prefix) + len(id) + 1
	header, rest := blob[:headerLen], blob[headerLen:]
	if len(rest) < aead.NonceSize()+aead.Overhead() {
		return nil, fmt.Errorf("%w: %s: sealed under %q but truncated", ErrCorrupt, at, id)
	}
	ad := header
	if v == 2 {
		ad = additionalData(header, at)
	}
	nonce, ciphertext := rest[:aead.NonceSize()], rest[aead.NonceSize():]
	plain, err := aead.Open(nil, nonce, ciphertext, ad)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: sealed under %q but does not authenticate here", ErrCorrupt, at, id)
	}
	if v == 1 && k.log != nil {
		k.unbound.Do(func() {
			k.log.Warn("content sealed by an older version is bound to no place; run turnstile state reseal to bind it",
				"place", at.String())
		})
	}
	return plain, nil
}

// Rebind returns a blob as Seal would write it for its place today: plain
// content sealed, a version 1 blob or one sealed under another key opened
// and sealed again under the first key, bound to at. A blob that already
// is so comes back as it is, and changed false, without being opened. It
// fails as Open does for a blob it cannot open, which it never rewrites:
// content sealed for another place stays unreadable.
func (k *Keyring) Rebind(blob []byte, at runtime.Place) (rebound []byte, changed bool, err error) {
	if k.Bound(blob) {
		return blob, false, nil
	}
	plain := blob
	if v, _, _ := parseHeader(blob); v != 0 {
		if plain, err = k.Open(blob, at); err != nil {
			return nil, false, err
		}
	}
	if rebound, err = k.Seal(plain, at); err != nil {
		return nil, false, err
	}
	return rebound, true, nil
}

// Bound reports whether a blob is of the current version under the first
// key: what Rebind leaves as it is. It does not check the blob opens.
func (k *Keyring) Bound(blob []byte) bool {
	return bytes.HasPrefix(blob, k.BoundPrefix())
}

// BoundPrefix is the header of every blob Seal writes now.
func (k *Keyring) BoundPrefix() []byte { return []byte(prefix + k.ids[0] + ":") }

// parseHeader returns a sealed blob's version (0 for a blob that is not
// sealed) and key id, and whether its header is whole.
func parseHeader(blob []byte) (version int, id string, ok bool) {
	switch {
	case bytes.HasPrefix(blob, []byte(prefix)):
		version = 2
	case bytes.HasPrefix(blob, []byte(prefixV1)):
		version = 1
	default:
		return 0, "", false
	}
	rest := blob[len(prefix):]
	end := bytes.IndexByte(rest[:min(len(rest), maxIDLen+1)], ':')
	if end < 1 || !idPattern.Match(rest[:end]) {
		return version, "", false
	}
	return version, string(rest[:end]), true
}

// KeyID returns the id of the key a blob was sealed under, and false for a
// blob that is not sealed (plain JSON or anything else).
func KeyID(blob []byte) (string, bool) {
	_, id, ok := parseHeader(blob)
	return id, ok
}
