package runtime

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
)

// Digest returns the turn digest of a pending turn: the SHA-256 (hex) of its
// canonical JSON. The transcript and the counters are not part of it, so the
// same question always has the same digest and a new question a new one.
func Digest(t PendingTurn) (string, error) {
	raw, err := json.Marshal(t)
	if err != nil {
		return "", fmt.Errorf("runtime: digest: %w", err)
	}
	canon, err := Canonical(raw)
	if err != nil {
		return "", fmt.Errorf("runtime: digest: %w", err)
	}
	sum := sha256.Sum256(canon)
	return hex.EncodeToString(sum[:]), nil
}

// Canonical rewrites a JSON document so that equal documents have equal
// bytes: object keys sorted, no insignificant space, numbers in their
// shortest form, strings escaped the one way encoding/json does without
// HTML escaping. It fails on anything that is not exactly one JSON value.
func Canonical(doc []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("canonical json: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("canonical json: trailing data")
	}
	var buf bytes.Buffer
	if err := writeCanonical(&buf, v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func writeCanonical(buf *bytes.Buffer, v any) error {
	switch v := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		buf.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				buf.WriteByte(',')
			}
			writeString(buf, k)
			buf.WriteByte(':')
			if err := writeCanonical(buf, v[k]); err != nil {
				return err
			}
		}
		buf.WriteByte('}')
	case []any:
		buf.WriteByte('[')
		for i, e := range v {
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := writeCanonical(buf, e); err != nil {
				return err
			}
		}
		buf.WriteByte(']')
	case string:
		writeString(buf, v)
	case json.Number:
		// 1, 1.0 and 1e0 are one number; integers keep every digit.
		if i, err := strconv.ParseInt(string(v), 10, 64); err == nil {
			buf.WriteString(strconv.FormatInt(i, 10))
			return nil
		}
		f, err := strconv.ParseFloat(string(v), 64)
		if err != nil {
			return fmt.Errorf("canonical json: number %q: %w", v, err)
		}
		// 1e6 and 1000000.0 are the integer 1000000, and -0.0 is 0.
		if f == math.Trunc(f) && f >= -1<<63 && f < 1<<63 {
			buf.WriteString(strconv.FormatInt(int64(f), 10))
			return nil
		}
		buf.WriteString(strconv.FormatFloat(f, 'g', -1, 64))
	case bool:
		buf.WriteString(strconv.FormatBool(v))
	case nil:
		buf.WriteString("null")
	default:
		return fmt.Errorf("canonical json: unexpected %T", v)
	}
	return nil
}

func writeString(buf *bytes.Buffer, s string) {
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)           // a string always encodes
	buf.Truncate(buf.Len() - 1) // Encode adds a newline
}
