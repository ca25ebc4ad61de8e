package runtime

import (
	"encoding/json"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// filter renders a payload at a privacy level: full keeps content,
// redacted keeps its shape with every scalar replaced, metadata (and any
// level it does not know, which must keep no content) drops it and keeps
// its size under "<key>_bytes". It works on the payload's Content fields,
// found by their type in the struct and in every struct, pointer and
// list of structs within it; everything else is metadata, stored as it
// is. Objects come out with their keys sorted, as encoding/json writes
// a map: a payload stores the bytes it stored when payloads were maps.
func filter(level PrivacyLevel, p EventPayload) json.RawMessage {
	b, err := appendPayload(make([]byte, 0, 256), level, reflect.ValueOf(p))
	if err != nil {
		// Payloads are built from JSON values; this cannot happen.
		b, _ = json.Marshal(map[string]string{"error": "payload not encodable"})
	}
	return b
}

// appendPayload appends v, a payload or a value within one, as the
// filter stores it.
func appendPayload(b []byte, level PrivacyLevel, v reflect.Value) ([]byte, error) {
	switch t := v.Type(); {
	case v.Kind() == reflect.Interface:
		if v.IsNil() {
			return append(b, "null"...), nil
		}
		return appendPayload(b, level, v.Elem())
	case walked(t):
		return appendObject(b, level, v)
	case v.Kind() == reflect.Pointer && walked(t.Elem()):
		if v.IsNil() {
			return append(b, "null"...), nil
		}
		return appendObject(b, level, v.Elem())
	case v.Kind() == reflect.Slice && walked(t.Elem()):
		if v.IsNil() {
			return append(b, "null"...), nil
		}
		b = append(b, '[')
		for i := range v.Len() {
			if i > 0 {
				b = append(b, ',')
			}
			var err error
			if b, err = appendObject(b, level, v.Index(i)); err != nil {
				return nil, err
			}
		}
		return append(b, ']'), nil
	}
	return appendJSON(b, v.Interface())
}

// appendObject appends a struct of a payload, its fields in the order of
// their stored keys.
func appendObject(b []byte, level PrivacyLevel, v reflect.Value) ([]byte, error) {
	pt := payloadTypeOf(v.Type())
	order := pt.sized
	if level == PrivacyFull || level == PrivacyRedacted {
		order = pt.kept
	}
	b = append(b, '{')
	n := 0
	for _, f := range order {
		fv := v.Field(f.index)
		var err error
		if f.content {
			value := fv.Field(contentValue).Interface()
			if f.omitEmpty && value == nil {
				continue
			}
			if n++; n > 1 {
				b = append(b, ',')
			}
			switch level {
			case PrivacyFull:
				b, err = appendJSON(append(b, f.key...), value)
			case PrivacyRedacted:
				b, err = appendJSON(append(b, f.key...), redact(value))
			default:
				b = strconv.AppendInt(append(b, f.sizeKey...), int64(size(value)), 10)
			}
		} else {
			if f.omitEmpty && emptyValue(fv) {
				continue
			}
			if n++; n > 1 {
				b = append(b, ',')
			}
			b, err = appendPayload(append(b, f.key...), level, fv)
		}
		if err != nil {
			return nil, err
		}
	}
	return append(b, '}'), nil
}

func appendJSON(b []byte, v any) ([]byte, error) {
	j, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return append(b, j...), nil
}

// redact keeps a value's structure (object keys, list lengths) and hides
// every scalar in it.
func redact(v any) any {
	switch v := v.(type) {
	case json.RawMessage:
		var decoded any
		if json.Unmarshal(v, &decoded) != nil {
			return "[redacted]"
		}
		return redact(decoded)
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[k] = redact(e)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = redact(e)
		}
		return out
	case nil:
		return nil
	default:
		return "[redacted]"
	}
}

func size(v any) int {
	switch v := v.(type) {
	case string:
		return len(v)
	case json.RawMessage:
		return len(v)
	default:
		b, _ := json.Marshal(v)
		return len(b)
	}
}

// payloadType is how the filter and DecodePayload see a struct of a
// payload, worked out once per type.
type payloadType struct {
	fields []payloadField // in the struct's order
	// kept and sized are the fields in the order of their stored keys:
	// content under its own key (full, redacted), or under "<key>_bytes"
	// (metadata).
	kept, sized []*payloadField
}

// payloadField is a field of a payload struct.
type payloadField struct {
	index     int
	name      string // the JSON key
	omitEmpty bool
	content   bool
	// key and sizeKey are the field's key as written: `"name":` and, for
	// content, `"name_bytes":`.
	key, sizeKey []byte
}

var (
	payloadTypes sync.Map // reflect.Type → *payloadType
	contentType  = reflect.TypeFor[Content]()
	marshaler    = reflect.TypeFor[json.Marshaler]()
)

// contentValue is the index of Content.Value.
const contentValue = 0

// walked reports whether the filter walks a type's fields: a struct that
// is not Content and does not encode itself (time.Time, say).
func walked(t reflect.Type) bool {
	return t.Kind() == reflect.Struct && t != contentType && !t.Implements(marshaler) && !reflect.PointerTo(t).Implements(marshaler)
}

func payloadTypeOf(t reflect.Type) *payloadType {
	if pt, ok := payloadTypes.Load(t); ok {
		return pt.(*payloadType)
	}
	pt := &payloadType{}
	for i := range t.NumField() {
		sf := t.Field(i)
		tag := sf.Tag.Get("json")
		if !sf.IsExported() || tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if name == "" {
			name = sf.Name
		}
		f := payloadField{index: i, name: name, content: sf.Type == contentType,
			omitEmpty: slices.Contains(strings.Split(opts, ","), "omitempty")}
		f.key = append(quoted(name), ':')
		f.sizeKey = append(quoted(name+"_bytes"), ':')
		pt.fields = append(pt.fields, f)
	}
	for i := range pt.fields {
		pt.kept = append(pt.kept, &pt.fields[i])
	}
	pt.sized = slices.Clone(pt.kept)
	slices.SortFunc(pt.kept, func(a, b *payloadField) int { return strings.Compare(a.name, b.name) })
	slices.SortFunc(pt.sized, func(a, b *payloadField) int { return strings.Compare(a.sizedName(), b.sizedName()) })
	actual, _ := payloadTypes.LoadOrStore(t, pt)
	return actual.(*payloadType)
}

// quoted is a key as encoding/json writes it.
func quoted(key string) []byte {
	b, _ := json.Marshal(key)
	return b
}

// sizedName is the field's key at the metadata level.
func (f *payloadField) sizedName() string {
	if f.content {
		return f.name + "_bytes"
	}
	return f.name
}

// emptyValue is encoding/json's omitempty: false, 0, "", a nil pointer or
// interface, an empty list or map. A struct is never empty.
func emptyValue(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Array, reflect.Map, reflect.Slice, reflect.String:
		return v.Len() == 0
	case reflect.Bool:
		return !v.Bool()
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return v.Int() == 0
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return v.Uint() == 0
	case reflect.Float32, reflect.Float64:
		return v.Float() == 0
	case reflect.Interface, reflect.Pointer:
		return v.IsNil()
	}
	return false
}
