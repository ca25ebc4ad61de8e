package web

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/turnstile-dev/turnstile/runtime"
)

// A JSON body is read once, token by token (json.Decoder.Token), straight
// into its route's body struct. The decoder sees every key, so a key given
// twice at any depth and a key in another case than its field's are
// refused where they stand; so is the first value past the route's
// limits, and the rest of the body is never read: a bulk of 349,520 empty
// entries is refused at its entry 501, after reading about 1.5 KB of it.
// encoding/json's Decode would build the whole value first, and could not
// tell a repeated key or a field's case at all.

// bodyLimits bound what one JSON body holds, beyond its size (maxAPIBytes).
type bodyLimits struct {
	// depth is how many arrays and objects a value may sit in, the body's
	// own object included: runtime.DecodeStrict's bound, so that whatever
	// passes here passes there too.
	depth int
	// values is how many values the whole body may hold: its object, each
	// key's value and each entry, at any depth.
	values int
	// entries is how many entries one array or object may hold; 0 leaves
	// them to values.
	entries int
	// tooMany is the refusal of an array or object (at path) with more
	// than entries entries; nil refuses with invalid_request.
	tooMany func(path string, limit int) error
}

// defaultLimits are every body's that has none of its own (limitedBody):
// room for any input answer or edited arguments a person types, little
// enough that the engine reading them again (runtime.NormalizeJSON) costs
// little.
var defaultLimits = bodyLimits{depth: runtime.MaxJSONDepth, values: 10_000}

// limitedBody is a body struct that has limits of its own.
type limitedBody interface {
	bodyLimits() bodyLimits
}

// errNotUTF8: the body holds bytes that are not UTF-8.
var errNotUTF8 = errors.New("the body is not valid UTF-8")

// bodyTypeError is a body struct the decoder cannot fill: a mistake of
// this package, answered 500, never a refusal.
type bodyTypeError struct{ t reflect.Type }

func (e *bodyTypeError) Error() string {
	return fmt.Sprintf("web: a JSON body cannot decode into %s", e.t)
}

var rawMessageType = reflect.TypeFor[json.RawMessage]()

// decodeBody reads one JSON value from r into dst, a pointer to a body
// struct, as encoding/json with DisallowUnknownFields would, and refuses
// more: a key given twice, a key in another case than its field's, data
// after the value, anything beyond limits. Its errors are a
// *runtime.Refusal, a *runtime.JSONError, a *json.SyntaxError, io.EOF (an
// empty body), io.ErrUnexpectedEOF, r's own (errNotUTF8,
// *http.MaxBytesError, …) or a *bodyTypeError.
func decodeBody(r io.Reader, dst any, limits bodyLimits) error {
	v := reflect.ValueOf(dst)
	if v.Kind() != reflect.Pointer || v.IsNil() {
		return &bodyTypeError{t: v.Type()}
	}
	d := &bodyDecoder{limits: limits}
	if holdsRaw(v.Type().Elem(), map[reflect.Type]bool{}) {
		// A json.RawMessage is the bytes as sent: keep what was read.
		d.read = &bytes.Buffer{}
		r = io.TeeReader(r, d.read)
	}
	d.dec = json.NewDecoder(r)
	d.dec.UseNumber()
	if err := d.value(v.Elem()); err != nil {
		return err
	}
	// Only the end of the body may follow; a stray ] or } too is a token.
	var syntax *json.SyntaxError
	switch _, err := d.dec.Token(); {
	case err == io.EOF:
		return nil
	case err == nil || errors.As(err, &syntax):
		return invalidBody("the body has data after its JSON object")
	default:
		return err
	}
}

// bodyDecoder is one body being read.
type bodyDecoder struct {
	dec     *json.Decoder
	read    *bytes.Buffer // what dec read, when the body holds a json.RawMessage
	limits  bodyLimits
	path    []string // keys and indexes from the body's object to the value being read
	values  int
	started bool // a token was read: an end of input now is too early
}

// invalidBody refuses a body that is not what its route takes.
func invalidBody(problem string) error {
	return invalid("the body is not the JSON this route takes: " + problem)
}

func (d *bodyDecoder) token() (json.Token, error) {
	tok, err := d.dec.Token()
	if err == io.EOF && d.started {
		err = io.ErrUnexpectedEOF
	}
	d.started = d.started || err == nil
	return tok, err
}

// enter counts a value about to be read, at d.path, against the limits.
func (d *bodyDecoder) enter() error {
	if len(d.path) > d.limits.depth {
		return &runtime.JSONError{Path: slices.Clone(d.path), Problem: fmt.Sprintf("nests deeper than %d levels", d.limits.depth)}
	}
	if d.values++; d.values > d.limits.values {
		return invalidBody(fmt.Sprintf("it holds more than %d values (every key's value and every entry counts, at any depth); this route takes at most %[1]d",
			d.limits.values))
	}
	return nil
}

// entry checks that an array or object may have its entry n (from 0)
// before it is read.
func (d *bodyDecoder) entry(n int) error {
	if d.limits.entries == 0 || n < d.limits.entries {
		return nil
	}
	path := strings.Join(d.path, ".")
	if d.limits.tooMany != nil {
		return d.limits.tooMany(path, d.limits.entries)
	}
	return invalidBody(fmt.Sprintf("%s has more than %d entries", path, d.limits.entries))
}

// child reads the value of key (or index) k into v.
func (d *bodyDecoder) child(k string, v reflect.Value) error {
	d.path = append(d.path, k)
	err := d.value(v)
	d.path = d.path[:len(d.path)-1]
	return err
}

// key reads an object's next key.
func (d *bodyDecoder) key() (string, error) {
	tok, err := d.token()
	if err != nil {
		return "", err
	}
	return tok.(string), nil // the decoder yields only strings as keys
}

// end reads the ] or } that closes what was read.
func (d *bodyDecoder) end() error {
	_, err := d.token()
	return err
}

func (d *bodyDecoder) twice(k string) error {
	return &runtime.JSONError{Path: append(slices.Clone(d.path), k), Problem: "is given twice"}
}

// value reads one value into v: null leaves v as it is, as encoding/json
// does.
func (d *bodyDecoder) value(v reflect.Value) error {
	if err := d.enter(); err != nil {
		return err
	}
	if v.Type() == rawMessageType {
		return d.raw(v)
	}
	switch v.Kind() {
	case reflect.Struct, reflect.Map, reflect.Slice, reflect.String, reflect.Bool,
		reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64:
	default:
		return &bodyTypeError{t: v.Type()}
	}
	tok, err := d.token()
	if err != nil {
		return err
	}
	switch tok := tok.(type) {
	case json.Delim:
		switch {
		case tok == '{' && v.Kind() == reflect.Struct:
			return d.object(v)
		case tok == '{' && v.Kind() == reflect.Map:
			return d.mapping(v)
		case tok == '[' && v.Kind() == reflect.Slice:
			return d.array(v)
		case tok == '{':
			return d.mismatch(v, "object")
		default:
			return d.mismatch(v, "array")
		}
	case string:
		if v.Kind() != reflect.String {
			return d.mismatch(v, "string")
		}
		v.SetString(tok)
	case bool:
		if v.Kind() != reflect.Bool {
			return d.mismatch(v, "bool")
		}
		v.SetBool(tok)
	case json.Number:
		return d.number(v, string(tok))
	}
	return nil
}

// mismatch refuses a value of the wrong kind for v, in encoding/json's
// words for what it is ("string", "number 1.5").
func (d *bodyDecoder) mismatch(v reflect.Value, what string) error {
	if len(d.path) == 0 {
		return invalidBody("the body must be a JSON object, not " + what)
	}
	return invalidBody(fmt.Sprintf("field %q must be %s, not %s", strings.Join(d.path, "."), jsonType(v.Kind()), what))
}

// number sets v to a number as encoding/json would: an integer field
// takes only integers within its range.
func (d *bodyDecoder) number(v reflect.Value, s string) error {
	switch v.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || v.OverflowInt(n) {
			return d.mismatch(v, "number "+s)
		}
		v.SetInt(n)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil || v.OverflowUint(n) {
			return d.mismatch(v, "number "+s)
		}
		v.SetUint(n)
	case reflect.Float32, reflect.Float64:
		f, err := strconv.ParseFloat(s, v.Type().Bits())
		if err != nil || v.OverflowFloat(f) {
			return d.mismatch(v, "number "+s)
		}
		v.SetFloat(f)
	default:
		return d.mismatch(v, "number")
	}
	return nil
}

// object reads an object into a struct: each key must be a field's exact
// name, given once.
func (d *bodyDecoder) object(v reflect.Value) error {
	fields := bodyFields(v.Type())
	given := make([]bool, v.NumField())
	for n := 0; d.dec.More(); n++ {
		if err := d.entry(n); err != nil {
			return err
		}
		k, err := d.key()
		if err != nil {
			return err
		}
		i, ok := fields[k]
		if !ok {
			where := ""
			if len(d.path) > 0 {
				where = " in " + strings.Join(d.path, ".")
			}
			return invalidBody(fmt.Sprintf("unknown field %q%s; this route takes only the fields its documentation names (GET /api/openapi.json)", k, where))
		}
		if given[i] {
			return d.twice(k)
		}
		given[i] = true
		if err := d.child(k, v.Field(i)); err != nil {
			return err
		}
	}
	return d.end()
}

// mapping reads an object into a map of string keys, each given once.
func (d *bodyDecoder) mapping(v reflect.Value) error {
	t := v.Type()
	if t.Key().Kind() != reflect.String {
		return &bodyTypeError{t: t}
	}
	if v.IsNil() {
		v.Set(reflect.MakeMap(t))
	}
	for n := 0; d.dec.More(); n++ {
		if err := d.entry(n); err != nil {
			return err
		}
		k, err := d.key()
		if err != nil {
			return err
		}
		kv := reflect.ValueOf(k).Convert(t.Key())
		if v.MapIndex(kv).IsValid() {
			return d.twice(k)
		}
		e := reflect.New(t.Elem()).Elem()
		if err := d.child(k, e); err != nil {
			return err
		}
		v.SetMapIndex(kv, e)
	}
	return d.end()
}

// array reads an array into a slice; [] is an empty slice, not nil, as
// with encoding/json.
func (d *bodyDecoder) array(v reflect.Value) error {
	s := reflect.MakeSlice(v.Type(), 0, 0)
	zero := reflect.Zero(v.Type().Elem())
	for n := 0; d.dec.More(); n++ {
		if err := d.entry(n); err != nil {
			return err
		}
		s = reflect.Append(s, zero)
		if err := d.child(strconv.Itoa(n), s.Index(n)); err != nil {
			return err
		}
	}
	if err := d.end(); err != nil {
		return err
	}
	v.Set(s)
	return nil
}

// raw reads a value as a json.RawMessage: its bytes as sent, after they
// were read as strictly as any other value.
func (d *bodyDecoder) raw(v reflect.Value) error {
	if d.read == nil {
		return &bodyTypeError{t: v.Type()}
	}
	// The offset is the end of the token before the value: what lies
	// between is space and the : or , before it.
	start := d.dec.InputOffset()
	if err := d.skip(); err != nil {
		return err
	}
	raw := bytes.TrimLeft(d.read.Bytes()[start:d.dec.InputOffset()], " \t\r\n:,")
	v.SetBytes(bytes.Clone(raw))
	return nil
}

// skip reads a value that raw keeps as bytes: every key given once, every
// value within the limits.
func (d *bodyDecoder) skip() error {
	tok, err := d.token()
	if err != nil {
		return err
	}
	inner := func(k string) error {
		d.path = append(d.path, k)
		defer func() { d.path = d.path[:len(d.path)-1] }()
		if err := d.enter(); err != nil {
			return err
		}
		return d.skip()
	}
	switch tok {
	case json.Delim('{'):
		var keys map[string]bool
		for n := 0; d.dec.More(); n++ {
			if err := d.entry(n); err != nil {
				return err
			}
			k, err := d.key()
			if err != nil {
				return err
			}
			if keys[k] {
				return d.twice(k)
			}
			if keys == nil {
				keys = map[string]bool{}
			}
			keys[k] = true
			if err := inner(k); err != nil {
				return err
			}
		}
		return d.end()
	case json.Delim('['):
		for n := 0; d.dec.More(); n++ {
			if err := d.entry(n); err != nil {
				return err
			}
			if err := inner(strconv.Itoa(n)); err != nil {
				return err
			}
		}
		return d.end()
	}
	return nil
}

// holdsRaw reports whether a body of type t holds a json.RawMessage.
func holdsRaw(t reflect.Type, seen map[reflect.Type]bool) bool {
	if t == rawMessageType {
		return true
	}
	if seen[t] {
		return false
	}
	seen[t] = true
	switch t.Kind() {
	case reflect.Struct:
		for i := range t.NumField() {
			if holdsRaw(t.Field(i).Type, seen) {
				return true
			}
		}
	case reflect.Slice, reflect.Array, reflect.Map, reflect.Pointer:
		return holdsRaw(t.Elem(), seen)
	}
	return false
}

var fieldsCache sync.Map // reflect.Type → map[string]int

// bodyFields maps the JSON name of each field of a body struct to its
// index: its json tag's name, else its Go name, as encoding/json names it.
func bodyFields(t reflect.Type) map[string]int {
	if f, ok := fieldsCache.Load(t); ok {
		return f.(map[string]int)
	}
	fields := map[string]int{}
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if !f.IsExported() || name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		fields[name] = i
	}
	fieldsCache.Store(t, fields)
	return fields
}

// utf8Reader hands on what it reads as long as it is UTF-8; at the first
// byte that is not, it hands on what came before, and then errNotUTF8. A
// rune split between two reads waits for its end.
type utf8Reader struct {
	r       io.Reader
	pending []byte // the start of a rune the last read split
	err     error  // for the next Read: errNotUTF8, or r's own
}

func (u *utf8Reader) Read(p []byte) (int, error) {
	for u.err == nil {
		if len(p) < utf8.UTFMax {
			return 0, io.ErrShortBuffer
		}
		n := copy(p, u.pending)
		m, err := u.r.Read(p[n:])
		b := p[:n+m]
		valid := validPrefix(b)
		rest := b[valid:]
		u.pending = u.pending[:0]
		switch {
		case len(rest) == 0:
		case !utf8.FullRune(rest) && err == nil:
			u.pending = append(u.pending, rest...)
		case err == nil || err == io.EOF:
			// A byte that starts no rune, or a rune the body's end cut.
			err = errNotUTF8
		}
		if err != nil {
			u.err = err
		}
		if valid > 0 {
			return valid, nil
		}
	}
	return 0, u.err
}

// validPrefix is how many bytes at the start of b are whole UTF-8 runes.
func validPrefix(b []byte) int {
	if utf8.Valid(b) {
		return len(b)
	}
	i := 0
	for i < len(b) {
		if b[i] < utf8.RuneSelf {
			i++
			continue
		}
		r, size := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && size == 1 {
			break
		}
		i += size
	}
	return i
}
