package runtime_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/turnstile-dev/turnstile/runtime"
)

func TestNormalizeJSON(t *testing.T) {
	tests := []struct {
		name, in, want string
		wantPath       string // of the *JSONError; "-" for none
		wantProblem    string
	}{
		{"sorted and compact", `{ "b": [1, 2.50, "x"], "a": {"z": null, "y": true} }`, `{"a":{"y":true,"z":null},"b":[1,2.50,"x"]}`, "-", ""},
		{"a key given twice", `{"amount":-999999,"note":"x","amount":5}`, "", "amount", "is given twice"},
		{"a key given twice, nested", `{"a":[{"b":1},{"b":1,"b":2}]}`, "", "a.1.b", "is given twice"},
		{"keys that differ in case are two keys", `{"Amount":1,"amount":2}`, `{"Amount":1,"amount":2}`, "-", ""},
		{"the largest int64", `{"n":9223372036854775807}`, `{"n":9223372036854775807}`, "-", ""},
		{"an integer beyond int64", `{"n":9223372036854775808}`, "", "n", "out of range"},
		{"a negative integer beyond int64", `{"n":-9223372036854775809}`, "", "n", "out of range"},
		{"a number beyond float64", `{"n":[1e400]}`, "", "n.0", "out of range"},
		{"a tiny number is zero, not an error", `{"n":1e-400}`, `{"n":1e-400}`, "-", ""},
		{"nesting of 64 levels", strings.Repeat("[", 64) + strings.Repeat("]", 64), strings.Repeat("[", 64) + strings.Repeat("]", 64), "-", ""},
		{"nesting beyond 64 levels", strings.Repeat("[", 66) + strings.Repeat("]", 66), "", "0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0", "nests deeper"},
		{"trailing data", `{} {}`, "", "", "data after"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := runtime.NormalizeJSON([]byte(tt.in))
			if tt.wantPath == "-" {
				if err != nil || string(got) != tt.want {
					t.Fatalf("NormalizeJSON = %s, %v; want %s", got, err, tt.want)
				}
				return
			}
			var je *runtime.JSONError
			if !errors.As(err, &je) {
				t.Fatalf("NormalizeJSON = %s, %v; want a JSONError", got, err)
			}
			if strings.Join(je.Path, ".") != tt.wantPath || !strings.Contains(je.Problem, tt.wantProblem) {
				t.Errorf("error at %q: %q; want at %q: %q", strings.Join(je.Path, "."), je.Problem, tt.wantPath, tt.wantProblem)
			}
		})
	}
	if _, err := runtime.NormalizeJSON([]byte(`{"a":`)); err == nil {
		t.Error("truncated JSON normalized without an error")
	}
}
