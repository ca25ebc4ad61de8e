package seal_test

import (
	"bytes"
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	"github.com/turnstile-dev/turnstile/runtime/seal"
)

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
			sealed, err := k.Seal(plain)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.HasPrefix(sealed, []byte("tse1:k1:")) {
				t.Errorf("sealed blob starts %q, want tse1:k1:", sealed[:min(len(sealed), 12)])
			}
			if bytes.Contains(sealed, []byte("iterations")) {
				t.Errorf("sealed blob contains the plain text")
			}
			if id, ok := seal.KeyID(sealed); !ok || id != "k1" {
				t.Errorf("KeyID = %q, %v; want k1, true", id, ok)
			}
			got, err := k.Open(sealed)
			if err != nil || !bytes.Equal(got, plain) {
				t.Fatalf("Open(Seal(p)) = %q, %v; want %q", got, err, plain)
			}
			again, _ := k.Seal(plain)
			if bytes.Equal(again, sealed) {
				t.Errorf("two seals of the same text are equal: the nonce is not fresh")
			}
		})
	}
}

func TestOpenRefusesAlteredBlobs(t *testing.T) {
	k := keyring(t, entry("A", keyA)+","+entry("B", keyB))
	sealed, err := k.Seal([]byte(`{"secret":"x"}`))
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
	swapped := append([]byte("tse1:B:"), sealed[len("tse1:A:"):]...)
	for _, tt := range []struct {
		name string
		blob []byte
	}{
		{"last byte (tag)", flip(len(sealed) - 1)},
		{"first ciphertext byte", flip(len("tse1:A:") + 12)},
		{"nonce", flip(len("tse1:A:"))},
		{"key id moved to another key", swapped},
		{"truncated", sealed[:len("tse1:A:")+20]},
		{"header only", []byte("tse1:A:")},
		{"garbage", []byte("not json, not sealed")},
		{"empty", nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := k.Open(tt.blob)
			if !errors.Is(err, seal.ErrCorrupt) {
				t.Errorf("Open = %q, %v; want ErrCorrupt", got, err)
			}
		})
	}
}

func TestOpenUnknownKey(t *testing.T) {
	sealed, err := keyring(t, entry("A", keyA)).Seal([]byte(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	_, err = keyring(t, entry("B", keyB)).Open(sealed)
	if !errors.Is(err, seal.ErrUnknownKey) || !strings.Contains(err.Error(), `"A"`) {
		t.Errorf("Open under a keyring without A = %v; want ErrUnknownKey naming A", err)
	}
	// Same id, other key: the blob does not authenticate.
	_, err = keyring(t, entry("A", keyB)).Open(sealed)
	if !errors.Is(err, seal.ErrCorrupt) {
		t.Errorf("Open with another key of the same id = %v; want ErrCorrupt", err)
	}
}

// TestRotation: a blob sealed under A opens after B is put in front of A,
// and new blobs are sealed under B.
func TestRotation(t *testing.T) {
	old := keyring(t, entry("A", keyA))
	sealedA, err := old.Seal([]byte(`{"n":1}`))
	if err != nil {
		t.Fatal(err)
	}
	rotated := keyring(t, entry("B", keyB)+","+entry("A", keyA))
	if got, err := rotated.Open(sealedA); err != nil || string(got) != `{"n":1}` {
		t.Fatalf("rotated.Open(sealed under A) = %q, %v", got, err)
	}
	sealedB, err := rotated.Seal([]byte(`{"n":2}`))
	if err != nil {
		t.Fatal(err)
	}
	if id, _ := seal.KeyID(sealedB); id != "B" || rotated.SealingKey() != "B" {
		t.Errorf("rotated keyring seals under %q (SealingKey %q), want B", id, rotated.SealingKey())
	}
	if _, err := old.Open(sealedB); !errors.Is(err, seal.ErrUnknownKey) {
		t.Errorf("the old keyring opened a blob sealed under B: %v", err)
	}
}

// TestPlainPassthrough: blobs written before keys were configured are plain
// JSON objects and open as they are.
func TestPlainPassthrough(t *testing.T) {
	k := keyring(t, entry("A", keyA))
	plain := []byte(`{"iterations":1}`)
	got, err := k.Open(plain)
	if err != nil || !bytes.Equal(got, plain) {
		t.Errorf("Open(plain JSON) = %q, %v; want it unchanged", got, err)
	}
	if _, ok := seal.KeyID(plain); ok {
		t.Errorf("KeyID(plain JSON) reports a key")
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
