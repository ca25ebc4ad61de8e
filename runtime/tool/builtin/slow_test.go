package builtin_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/turnstile-dev/turnstile/runtime"
	"github.com/turnstile-dev/turnstile/runtime/tool/builtin"
)

func TestSlowTaskSleeps(t *testing.T) {
	start := time.Now()
	got, err := call(t, builtin.SlowTask{}, `{"seconds":0.05,"label":"index"}`)
	elapsed := time.Since(start)
	checkResult(t, got, err, `{"slept_seconds":0.05}`, "")
	if elapsed < 50*time.Millisecond {
		t.Errorf("returned after %v, want at least 50ms", elapsed)
	}
}

func TestSlowTaskStopsWithContext(t *testing.T) {
	tests := []struct {
		name    string
		ctx     func() (context.Context, context.CancelFunc)
		seconds string
		wantErr error
	}{
		{
			name: "deadline during the wait",
			ctx: func() (context.Context, context.CancelFunc) {
				return context.WithTimeout(context.Background(), 50*time.Millisecond)
			},
			seconds: "120",
			wantErr: context.DeadlineExceeded,
		},
		{
			name: "cancelled before a zero wait",
			ctx: func() (context.Context, context.CancelFunc) {
				ctx, cancel := context.WithCancel(context.Background())
				cancel()
				return ctx, cancel
			},
			seconds: "0",
			wantErr: context.Canceled,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := tt.ctx()
			defer cancel()
			start := time.Now()
			got, err := builtin.SlowTask{}.Call(ctx, runtime.Invocation{Arguments: json.RawMessage(`{"seconds":` + tt.seconds + `}`)})
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("result %q, error %v; want an error wrapping %v", got, err, tt.wantErr)
			}
			if elapsed := time.Since(start); elapsed > 5*time.Second {
				t.Errorf("returned after %v, want it to stop with the context", elapsed)
			}
		})
	}
}

func TestSlowTaskInvalidArguments(t *testing.T) {
	tests := []struct {
		args    string
		wantErr string
	}{
		{`{}`, "seconds is required"},
		{`{"seconds":null}`, "seconds is required"},
		{`{"seconds":-0.5}`, "seconds must be between 0 and 120, not -0.5"},
		{`{"seconds":120.5}`, "seconds must be between 0 and 120, not 120.5"},
		{`{"seconds":"30"}`, "seconds must be a number, not string"},
		{`{"seconds":1,"label":["a"]}`, "label must be a string, not array"},
		{`{"seconds":1,"silent":true}`, `unknown field "silent"`},
	}
	for _, tt := range tests {
		t.Run(tt.args, func(t *testing.T) {
			start := time.Now()
			got, err := call(t, builtin.SlowTask{}, tt.args)
			checkResult(t, got, err, "", tt.wantErr)
			if elapsed := time.Since(start); elapsed > time.Second {
				t.Errorf("invalid arguments took %v, want no wait", elapsed)
			}
		})
	}
}
