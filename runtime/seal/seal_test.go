package seal_test

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/turnstile-dev/turnstile/runtime"
	"github.com/turnstile-dev/turnstile/runtime/seal"
)

// here is the place the unit tests seal for.
var here = runtime.RunPlace("state", 7)

// Keys the tests use; each is distinct so a leak in a message is easy to
// spot.
var (
	keyA = bytes.Repeat([]byte{0xA1}, 32)
	keyB = bytes.Repeat([]byte{0xB2}, 16)
	keyC = bytes.Repeat([]byte{0xC3}, 24)
)

func entry(id string, key []byte) string { return id + ":" + base64.StdEncoding.EncodeToString(key) }

func keyring(t *testing.T, spec string) *seal.Keyring {
	t.Helper()
	k, err := seal.Parse(spec)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return k
}

func TestRoundTrip(t *testing.T) {
	for _, tt := range []struct {
		name string
		key  []byte
	}{{"AES-256", keyA}, {"AES-128", keyB}, {"AES-192", keyC}} {
		t.Run(tt.name, func(t *testing.T) {
			k := keyring(t, entry("k1", tt.key))
			plain := []byte(`{"iterations":2,"pending":{"kind":"approval"}}`)
			sealed, err := k.Seal(plain, here)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.HasPrefix(sealed, []byte("tse2:k1:")) {
				t.Errorf("sealed blob starts %q, want tse2:k1:", sealed[:min(len(sealed), 12)])
			}
			if bytes.Contains(sealed, []byte("iterations")) {
				t.Errorf("sealed blob contains the plain text")
			}
			if id, ok := seal.KeyID(sealed); !ok || id != "k1" {
				t.Errorf("KeyID = %q, %v; want k1, true", id, ok)
			}
			got, err := k.Open(sealed, here)
			if err != nil || !bytes.Equal(got, plain) {
				t.Fatalf("Open(Seal(p)) = %q, %v; want %q", got, err, plain)
			}
			again, _ := k.Seal(plain, here)
			if bytes.Equal(again, sealed) {
				t.Errorf("two seals of the same text are equal: the nonce is not fresh")
			}
		})
	}
}

func TestOpenRefusesAlteredBlobs(t *testing.T) {
	k := keyring(t, entry("A", keyA)+","+entry("B", keyB))
	sealed, err := k.Seal([]byte(`{"secret":"x"}`), here)
	if err != nil {
		t.Fatal(err)
	}
	flip := func(i int) []byte {
		b := bytes.Clone(sealed)
		b[i] ^= 0x01
		return b
	}
	// The blob sealed under A, its header claiming B: the header is
	// authenticated, so the swap fails even though B exists.
	swapped := append([]byte("tse2:B:"), sealed[len("tse2:A:"):]...)
	for _, tt := range []struct {
		name string
		blob []byte
	}{
		{"last byte (tag)", flip(len(sealed) - 1)},
		{"first ciphertext byte", flip(len("tse2:A:") + 12)},
		{"nonce", flip(len("tse2:A:"))},
		{"key id moved to another key", swapped},
		{"version 2 made version 1", append([]byte("tse1:"), sealed[len("tse2:"):]...)},
		{"truncated", sealed[:len("tse2:A:")+20]},
		{"header only", []byte("tse2:A:")},
		{"header without an id", []byte("tse2::abc")},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := k.Open(tt.blob, here)
			if !errors.Is(err, seal.ErrCorrupt) {
				t.Errorf("Open = %q, %v; want ErrCorrupt", got, err)
			}
		})
	}
}

func TestOpenUnknownKey(t *testing.T) {
	sealed, err := keyring(t, entry("A", keyA)).Seal([]byte(`{}`), here)
	if err != nil {
		t.Fatal(err)
	}
	_, err = keyring(t, entry("B", keyB)).Open(sealed, here)
	if !errors.Is(err, seal.ErrUnknownKey) || !strings.Contains(err.Error(), `"A"`) {
		t.Errorf("Open under a keyring without A = %v; want ErrUnknownKey naming A", err)
	}
	// Same id, other key: the blob does not authenticate.
	_, err = keyring(t, entry("A", keyB)).Open(sealed, here)
	if !errors.Is(err, seal.ErrCorrupt) {
		t.Errorf("Open with another key of the same id = %v; want ErrCorrupt", err)
	}
}

// TestRotation: a blob sealed under A opens after B is put in front of A,
// and new blobs are sealed under B.
func TestRotation(t *testing.T) {
	old := keyring(t, entry("A", keyA))
	sealedA, err := old.Seal([]byte(`{"n":1}`), here)
	if err != nil {
		t.Fatal(err)
	}
	rotated := keyring(t, entry("B", keyB)+","+entry("A", keyA))
	if got, err := rotated.Open(sealedA, here); err != nil || string(got) != `{"n":1}` {
		t.Fatalf("rotated.Open(sealed under A) = %q, %v", got, err)
	}
	sealedB, err := rotated.Seal([]byte(`{"n":2}`), here)
	if err != nil {
		t.Fatal(err)
	}
	if id, _ := seal.KeyID(sealedB); id != "B" || rotated.SealingKey() != "B" {
		t.Errorf("rotated keyring seals under %q (SealingKey %q), want B", id, rotated.SealingKey())
	}
	if _, err := old.Open(sealedB, here); !errors.Is(err, seal.ErrUnknownKey) {
		t.Errorf("the old keyring opened a blob sealed under B: %v", err)
	}
}

// TestBoundToItsPlace: a blob opens at the place it was sealed for and
// nowhere else — not in another run, column, table or row.
func TestBoundToItsPlace(t *testing.T) {
	k := keyring(t, entry("A", keyA))
	at := runtime.EventPlace(42, 3)
	sealed, err := k.Seal([]byte(`{"reason":"x"}`), at)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := k.Open(sealed, at); err != nil || string(got) != `{"reason":"x"}` {
		t.Fatalf("Open at its place = %q, %v", got, err)
	}
	for _, elsewhere := range []runtime.Place{
		runtime.EventPlace(43, 3),
		runtime.EventPlace(42, 4),
		{Table: "run_events", Column: "body", RunID: 42, Row: "3"},
		{Table: "run_messages", Column: "payload", RunID: 42, Row: "3"},
		runtime.MessagePlace(42, 3),
		runtime.RunPlace("state", 42),
		runtime.DecisionPlace("reason", 42, "3"),
	} {
		if got, err := k.Open(sealed, elsewhere); !errors.Is(err, seal.ErrCorrupt) {
			t.Errorf("Open at %s = %q, %v; want ErrCorrupt", elsewhere, got, err)
		}
	}
	if _, err := k.Seal([]byte("x"), runtime.Place{}); err == nil {
		t.Errorf("Seal for no place succeeded")
	}
}

// TestPlainIsRefused: with keys, content that is not sealed — plain JSON
// stored before keys were set, or anything else — is ErrNotSealed, which
// is runtime.ErrNotSealed.
func TestPlainIsRefused(t *testing.T) {
	k := keyring(t, entry("A", keyA))
	for _, plain := range [][]byte{[]byte(`{"iterations":1}`), []byte("a plain prompt"), nil} {
		if got, err := k.Open(plain, here); !errors.Is(err, seal.ErrNotSealed) || !errors.Is(err, runtime.ErrNotSealed) {
			t.Errorf("Open(%q) = %q, %v; want ErrNotSealed", plain, got, err)
		}
	}
	if _, ok := seal.KeyID([]byte(`{"iterations":1}`)); ok {
		t.Errorf("KeyID(plain JSON) reports a key")
	}
}

// sealV1 seals as version 1 did: the header its only additional data.
func sealV1(t *testing.T, id string, key, plain []byte) []byte {
	t.Helper()
	block, err := aes.NewCipher(key)
	if err != nil {
		t.Fatal(err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		t.Fatal(err)
	}
	header := []byte("tse1:" + id + ":")
	nonce := make([]byte, aead.NonceSize())
	rand.Read(nonce)
	return aead.Seal(append(bytes.Clone(header), nonce...), nonce, plain, header)
}

// TestVersion1OpensUnbound: a blob sealed before blobs were bound to their
// place opens wherever it is read, so an upgrade locks nobody out; the
// keyring logs the first one, once, asking for state reseal.
func TestVersion1OpensUnbound(t *testing.T) {
	k := keyring(t, entry("A", keyA))
	var logged bytes.Buffer
	k.LogUnbound(slog.New(slog.NewTextHandler(&logged, nil)))
	old := sealV1(t, "A", keyA, []byte("older"))
	for _, at := range []runtime.Place{runtime.RunPlace("answer", 1), runtime.RunPlace("prompt", 2)} {
		if got, err := k.Open(old, at); err != nil || string(got) != "older" {
			t.Errorf("Open(tse1) at %s = %q, %v; want it opened", at, got, err)
		}
	}
	if n := strings.Count(logged.String(), "state reseal"); n != 1 {
		t.Errorf("logged %d times about unbound content, want once:\n%s", n, logged.String())
	}
	if _, err := k.Open(sealV1(t, "A", keyB, []byte("x")), here); !errors.Is(err, seal.ErrCorrupt) {
		t.Errorf("Open(tse1 under another key of the id) = %v, want ErrCorrupt", err)
	}
}

// TestRebind: plain content, version 1 blobs and blobs under an older key
// come back sealed under the first key for their place; a blob that is so
// already comes back as it is; one that does not open is an error.
func TestRebind(t *testing.T) {
	k := keyring(t, entry("A", keyA)+","+entry("B", keyB))
	underB, err := keyring(t, entry("B", keyB)).Seal([]byte("under B"), here)
	if err != nil {
		t.Fatal(err)
	}
	for name, blob := range map[string][]byte{
		"plain": []byte("plain"), "tse1": sealV1(t, "B", keyB, []byte("tse1")), "under B": underB,
	} {
		got, changed, err := k.Rebind(blob, here)
		if err != nil || !changed || !k.Bound(got) {
			t.Errorf("Rebind(%s) = %q, %v, %v; want it sealed under A", name, got[:min(len(got), 8)], changed, err)
			continue
		}
		want := string(blob)
		if name != "plain" {
			want = name
		}
		if plain, err := keyring(t, entry("A", keyA)).Open(got, here); err != nil || string(plain) != want {
			t.Errorf("Rebind(%s) opens under A alone as %q, %v; want %q", name, plain, err, want)
		}
		if again, changed, err := k.Rebind(got, here); changed || err != nil || !bytes.Equal(again, got) {
			t.Errorf("Rebind of a bound blob = %v, %v; want it as it is", changed, err)
		}
	}
	if _, _, err := k.Rebind(underB, runtime.RunPlace("state", 8)); !errors.Is(err, seal.ErrCorrupt) {
		t.Errorf("Rebind of a blob moved from its place = %v, want ErrCorrupt", err)
	}
	if _, _, err := k.Rebind(sealV1(t, "C", keyC, []byte("x")), here); !errors.Is(err, seal.ErrUnknownKey) {
		t.Errorf("Rebind of a blob under a key it lacks = %v, want ErrUnknownKey", err)
	}
}

func TestParse(t *testing.T) {
	k := keyring(t, " new:"+base64.RawURLEncoding.EncodeToString(keyA)+" , old_1:"+base64.StdEncoding.EncodeToString(keyB))
	if got := strings.Join(k.Keys(), ","); got != "new,old_1" {
		t.Errorf("Keys = %s, want new,old_1", got)
	}

	secret := base64.StdEncoding.EncodeToString([]byte("0123456789abcdefXYZ")) // 19 bytes
	good := entry("A", keyA)
	tests := []struct {
		name, spec, want string
	}{
		{"empty", "", "no keys"},
		{"blank entry", good + ",,", "key 2 is empty"},
		{"no id", base64.StdEncoding.EncodeToString(keyA), "key 1 has no id"},
		{"bad id", "a b:" + base64.StdEncoding.EncodeToString(keyA), "key 1: the id must be"},
		{"id too long", strings.Repeat("x", 33) + ":" + base64.StdEncoding.EncodeToString(keyA), "the id must be"},
		{"duplicate id", good + "," + entry("A", keyB), `key 2: id "A" is given twice`},
		{"not base64", "A:" + secret + "!!", "key 1 (A): not valid base64"},
		{"wrong length", "A:" + secret, "key 1 (A): 19 bytes, want 16, 24 or 32"},
		{"key pasted as id", secret + ":" + secret, "key 1: the id must be"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := seal.Parse(tt.spec)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Parse = %v, want an error containing %q", err, tt.want)
			}
			msg := err.Error()
			for _, material := range []string{secret, base64.StdEncoding.EncodeToString(keyA), base64.StdEncoding.EncodeToString(keyB), "0123456789abcdef"} {
				if strings.Contains(msg, material) {
					t.Errorf("error %q contains key material", msg)
				}
			}
		})
	}
}

// openV1 opens a blob as the previous version did: version 1 only, the
// header alone as additional data.
func openV1(t *testing.T, key, blob []byte) ([]byte, error) {
	t.Helper()
	block, err := aes.NewCipher(key)
	if err != nil {
		t.Fatal(err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(blob, []byte("tse1:")) {
		return nil, errors.New("not a version 1 blob")
	}
	end := bytes.IndexByte(blob[len("tse1:"):], ':') + len("tse1:") + 1
	header, rest := blob[:end], blob[end:]
	return aead.Open(nil, rest[:aead.NonceSize()], rest[aead.NonceSize():], header)
}

// TestSealUnboundIsReadByThePreviousVersion: during a rolling upgrade the
// new processes seal as the old ones did, so an old process opens what a
// new one wrote; by default a new process binds every blob, which the old
// one could not open.
func TestSealUnboundIsReadByThePreviousVersion(t *testing.T) {
	k := keyring(t, entry("A", keyA))
	bound, err := k.Seal([]byte("bound"), here)
	if err != nil {
		t.Fatal(err)
	}
	if k.Sealing() != 2 || !bytes.HasPrefix(bound, []byte("tse2:A:")) {
		t.Fatalf("Seal = %q (version %d), want a version 2 blob by default", bound, k.Sealing())
	}
	if _, err := openV1(t, keyA, bound); err == nil {
		t.Error("the previous version opened a version 2 blob; the test's old reader is wrong")
	}
	k.SealUnbound()
	unbound, err := k.Seal([]byte("unbound"), here)
	if err != nil {
		t.Fatal(err)
	}
	if k.Sealing() != 1 || !bytes.HasPrefix(unbound, []byte("tse1:A:")) {
		t.Fatalf("Seal after SealUnbound = %q (version %d), want a version 1 blob", unbound, k.Sealing())
	}
	if got, err := openV1(t, keyA, unbound); err != nil || string(got) != "unbound" {
		t.Errorf("the previous version opened %q, %v; want it opened", got, err)
	}
	if got, err := keyring(t, entry("A", keyA)).Open(unbound, runtime.RunPlace("answer", 99)); err != nil || string(got) != "unbound" {
		t.Errorf("this version opened %q, %v elsewhere; want it opened, bound to no place", got, err)
	}
}
