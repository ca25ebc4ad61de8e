package builtin_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/turnstile-dev/turnstile/runtime"
	"github.com/turnstile-dev/turnstile/runtime/tool/builtin"
)

// fakeOrders is an in-memory Orders: the tools' logic is under test here,
// the MySQL side is tested in store.
type fakeOrders struct {
	mu      sync.Mutex
	orders  map[string]builtin.Order
	refunds []builtin.Refund
	// failOrder and failInsert, when set, are returned instead.
	failOrder  error
	failInsert error
}

func newFakeOrders(orders ...builtin.Order) *fakeOrders {
	f := &fakeOrders{orders: map[string]builtin.Order{}}
	for _, o := range orders {
		f.orders[o.ID] = o
	}
	return f
}

func (f *fakeOrders) Order(ctx context.Context, id string) (builtin.Order, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failOrder != nil {
		return builtin.Order{}, f.failOrder
	}
	o, ok := f.orders[id]
	if !ok {
		return builtin.Order{}, fmt.Errorf("fake: order %q: %w", id, runtime.ErrNotFound)
	}
	return o, nil
}

func (f *fakeOrders) InsertRefund(ctx context.Context, r builtin.Refund) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failInsert != nil {
		return 0, f.failInsert
	}
	f.refunds = append(f.refunds, r)
	return int64(len(f.refunds)), nil
}

func (f *fakeOrders) Refunds() []builtin.Refund {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.refunds)
}

var order1 = builtin.Order{ID: "ORD-1", Customer: "Ada Lovelace", AmountCents: 5000, Currency: "EUR"}

// compile compiles a JSON Schema the way the engine's validator would.
func compile(t *testing.T, schema json.RawMessage) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(string(schema)))
	if err != nil {
		t.Fatalf("schema is not JSON: %v\n%s", err, schema)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("mem://schema.json", doc); err != nil {
		t.Fatalf("add schema: %v", err)
	}
	s, err := c.Compile("mem://schema.json")
	if err != nil {
		t.Fatalf("schema does not compile: %v\n%s", err, schema)
	}
	return s
}

// valid reports whether a JSON document satisfies a compiled schema.
func valid(t *testing.T, s *jsonschema.Schema, doc string) bool {
	t.Helper()
	v, err := jsonschema.UnmarshalJSON(strings.NewReader(doc))
	if err != nil {
		t.Fatalf("test document %s is not JSON: %v", doc, err)
	}
	return s.Validate(v) == nil
}

func call(t *testing.T, tool runtime.Tool, args string) (string, error) {
	t.Helper()
	return tool.Call(context.Background(), runtime.Invocation{RunID: 7, OwnerID: 3, CallID: "call-1", Arguments: json.RawMessage(args)})
}

func TestToolsSpecs(t *testing.T) {
	tools := builtin.Tools(newFakeOrders())
	tests := []struct {
		name     string
		effect   runtime.Effect
		required []string
		asks     bool
	}{
		{builtin.NameLookupOrder, runtime.ReadOnly, []string{"order_id"}, false},
		{builtin.NameRefundOrder, runtime.NonIdempotentWrite, []string{"order_id"}, false},
		{builtin.NameAskOperator, runtime.ReadOnly, []string{"question"}, true},
		{builtin.NameSlowTask, runtime.ReadOnly, []string{"seconds"}, false},
	}
	if got, want := len(tools), len(tests); got != want {
		t.Fatalf("Tools returned %d tools, want %d", got, want)
	}
	reg := builtin.Registry(tools...)
	if got, want := len(reg), len(tests); got != want {
		t.Fatalf("Registry has %d entries, want %d", got, want)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tool, ok := reg[tt.name]
			if !ok {
				t.Fatalf("Registry has no %s", tt.name)
			}
			spec := tool.Spec()
			if spec.Name != tt.name {
				t.Errorf("Name = %q, want %q", spec.Name, tt.name)
			}
			if spec.Effect != tt.effect {
				t.Errorf("Effect = %q, want %q", spec.Effect, tt.effect)
			}
			if spec.Description == "" {
				t.Error("Description is empty")
			}
			compile(t, spec.Parameters)
			var params struct {
				Type                 string          `json:"type"`
				Required             []string        `json:"required"`
				AdditionalProperties *bool           `json:"additionalProperties"`
				Properties           json.RawMessage `json:"properties"`
			}
			if err := json.Unmarshal(spec.Parameters, &params); err != nil {
				t.Fatal(err)
			}
			if params.Type != "object" {
				t.Errorf("parameters type = %q, want object", params.Type)
			}
			if params.AdditionalProperties == nil || *params.AdditionalProperties {
				t.Error("parameters allow additional properties")
			}
			if !slices.Equal(params.Required, tt.required) {
				t.Errorf("required = %v, want %v", params.Required, tt.required)
			}
			if got := spec.Asks != nil; got != tt.asks {
				t.Errorf("input tool = %v, want %v", got, tt.asks)
			}
		})
	}
}

func TestSpecReturnsFreshSchema(t *testing.T) {
	tool := builtin.NewLookupOrder(newFakeOrders())
	spec := tool.Spec()
	spec.Parameters[0] = 'X'
	if got := tool.Spec().Parameters[0]; got != '{' {
		t.Errorf("changing one Spec's Parameters changed the next: first byte %q", got)
	}
}

type namedTool struct {
	name string
	runtime.Tool
}

func (n namedTool) Spec() runtime.ToolSpec { return runtime.ToolSpec{Name: n.name} }

func TestRegistryLaterWins(t *testing.T) {
	first := namedTool{name: "x", Tool: builtin.SlowTask{}}
	second := namedTool{name: "x", Tool: builtin.AskOperator{}}
	reg := builtin.Registry(first, second)
	if got, want := len(reg), 1; got != want {
		t.Fatalf("len = %d, want %d", got, want)
	}
	if got := reg["x"]; got != runtime.Tool(second) {
		t.Errorf("Registry kept %v, want the later tool", got)
	}
}

func TestLookupOrder(t *testing.T) {
	tests := []struct {
		name    string
		args    string
		want    string // the result's JSON, when wantErr is ""
		wantErr string // a part of the error's message
	}{
		{name: "found", args: `{"order_id":"ORD-1"}`, want: `{"order_id":"ORD-1","customer":"Ada Lovelace","amount_cents":5000,"currency":"EUR"}`},
		{name: "unknown order", args: `{"order_id":"ORD-9"}`, wantErr: "order ORD-9 not found"},
		{name: "missing order_id", args: `{}`, wantErr: "order_id is required"},
		{name: "empty arguments", args: ``, wantErr: "order_id is required"},
		{name: "null order_id", args: `{"order_id":null}`, wantErr: "order_id is required"},
		{name: "number for string", args: `{"order_id":1001}`, wantErr: "order_id must be a string, not number"},
		{name: "unknown field", args: `{"order_id":"ORD-1","verbose":true}`, wantErr: `unknown field "verbose"`},
		{name: "not an object", args: `["ORD-1"]`, wantErr: "arguments must be a JSON object, not array"},
		{name: "broken JSON", args: `{"order_id":`, wantErr: "not valid JSON"},
		{name: "trailing value", args: `{"order_id":"ORD-1"} {}`, wantErr: "trailing data after the JSON object"},
		{name: "trailing garbage", args: `{"order_id":"ORD-1"}x`, wantErr: "trailing data after the JSON object"},
	}
	tool := builtin.NewLookupOrder(newFakeOrders(order1))
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := call(t, tool, tt.args)
			checkResult(t, got, err, tt.want, tt.wantErr)
		})
	}
}

func TestLookupOrderErrors(t *testing.T) {
	t.Run("not found wraps ErrNotFound", func(t *testing.T) {
		_, err := call(t, builtin.NewLookupOrder(newFakeOrders()), `{"order_id":"ORD-9"}`)
		if got, want := fmt.Sprint(err), "order ORD-9 not found"; got != want {
			t.Errorf("error = %q, want %q", got, want)
		}
		if !errors.Is(err, runtime.ErrNotFound) {
			t.Errorf("error %v does not wrap runtime.ErrNotFound", err)
		}
	})
	t.Run("database failure", func(t *testing.T) {
		orders := newFakeOrders(order1)
		boom := errors.New("connection refused")
		orders.failOrder = boom
		_, err := call(t, builtin.NewLookupOrder(orders), `{"order_id":"ORD-1"}`)
		if !errors.Is(err, boom) {
			t.Errorf("error = %v, want it to wrap %v", err, boom)
		}
	})
}

// checkResult compares a tool's result as JSON, or the error's message.
func checkResult(t *testing.T, got string, err error, want, wantErr string) {
	t.Helper()
	if wantErr != "" {
		if err == nil {
			t.Fatalf("result = %s, want an error containing %q", got, wantErr)
		}
		if !strings.Contains(err.Error(), wantErr) {
			t.Fatalf("error = %q, want it to contain %q", err, wantErr)
		}
		return
	}
	if err != nil {
		t.Fatalf("error = %v, want result %s", err, want)
	}
	gotCanon, err := runtime.Canonical([]byte(got))
	if err != nil {
		t.Fatalf("result %q is not JSON: %v", got, err)
	}
	wantCanon, err := runtime.Canonical([]byte(want))
	if err != nil {
		t.Fatal(err)
	}
	if string(gotCanon) != string(wantCanon) {
		t.Errorf("result = %s, want %s", got, want)
	}
}

func TestRefundOrder(t *testing.T) {
	long := strings.Repeat("é", 501)
	tests := []struct {
		name       string
		args       string
		want       string
		wantErr    string
		wantRefund *builtin.Refund
	}{
		{
			name:       "whole order by default",
			args:       `{"order_id":"ORD-1"}`,
			want:       `{"refund_id":1,"order_id":"ORD-1","amount_cents":5000}`,
			wantRefund: &builtin.Refund{OrderID: "ORD-1", AmountCents: 5000, RunID: 7, CallID: "call-1"},
		},
		{
			name:       "part with a reason",
			args:       `{"order_id":"ORD-1","amount_cents":1250,"reason":"damaged"}`,
			want:       `{"refund_id":1,"order_id":"ORD-1","amount_cents":1250}`,
			wantRefund: &builtin.Refund{OrderID: "ORD-1", AmountCents: 1250, RunID: 7, CallID: "call-1"},
		},
		{
			name:       "integer written as a float",
			args:       `{"order_id":"ORD-1","amount_cents":100.0}`,
			want:       `{"refund_id":1,"order_id":"ORD-1","amount_cents":100}`,
			wantRefund: &builtin.Refund{OrderID: "ORD-1", AmountCents: 100, RunID: 7, CallID: "call-1"},
		},
		{
			name:       "exactly the order's amount",
			args:       `{"order_id":"ORD-1","amount_cents":5000}`,
			want:       `{"refund_id":1,"order_id":"ORD-1","amount_cents":5000}`,
			wantRefund: &builtin.Refund{OrderID: "ORD-1", AmountCents: 5000, RunID: 7, CallID: "call-1"},
		},
		{name: "more than the order", args: `{"order_id":"ORD-1","amount_cents":5001}`, wantErr: "amount_cents must be between 1 and 5000"},
		{name: "zero", args: `{"order_id":"ORD-1","amount_cents":0}`, wantErr: "amount_cents must be between 1 and 5000"},
		{name: "negative", args: `{"order_id":"ORD-1","amount_cents":-5}`, wantErr: "amount_cents must be between 1 and 5000"},
		{name: "fraction", args: `{"order_id":"ORD-1","amount_cents":12.5}`, wantErr: "amount_cents must be an integer, not number 12.5"},
		{name: "string amount", args: `{"order_id":"ORD-1","amount_cents":"12"}`, wantErr: "amount_cents must be an integer"},
		{name: "unknown order", args: `{"order_id":"ORD-9"}`, wantErr: "order ORD-9 not found"},
		{name: "missing order_id", args: `{"amount_cents":5}`, wantErr: "order_id is required"},
		{name: "unknown field", args: `{"order_id":"ORD-1","currency":"USD"}`, wantErr: `unknown field "currency"`},
		{name: "reason too long", args: `{"order_id":"ORD-1","reason":"` + long + `"}`, wantErr: "reason may have at most 500 characters, not 501"},
		{name: "reason not a string", args: `{"order_id":"ORD-1","reason":false}`, wantErr: "reason must be a string, not bool"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			orders := newFakeOrders(order1)
			got, err := call(t, builtin.NewRefundOrder(orders), tt.args)
			checkResult(t, got, err, tt.want, tt.wantErr)
			var want []builtin.Refund
			if tt.wantRefund != nil {
				want = []builtin.Refund{*tt.wantRefund}
			}
			if got := orders.Refunds(); !slices.Equal(got, want) {
				t.Errorf("refunds = %+v, want %+v", got, want)
			}
		})
	}
}

// refund_order has no de-duplication of its own: the same call executed
// twice is two refunds, which is what lets the pipeline's exactly-once be
// counted.
func TestRefundOrderInsertsEveryExecution(t *testing.T) {
	orders := newFakeOrders(order1)
	tool := builtin.NewRefundOrder(orders)
	for range 2 {
		if _, err := call(t, tool, `{"order_id":"ORD-1","amount_cents":10}`); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := len(orders.Refunds()), 2; got != want {
		t.Errorf("refunds = %d, want %d", got, want)
	}
}

func TestRefundOrderInsertFails(t *testing.T) {
	orders := newFakeOrders(order1)
	boom := errors.New("deadlock")
	orders.failInsert = boom
	got, err := call(t, builtin.NewRefundOrder(orders), `{"order_id":"ORD-1"}`)
	if !errors.Is(err, boom) {
		t.Fatalf("result %q, error %v; want an error wrapping %v", got, err, boom)
	}
}

func TestAskOperatorCallNeedsPerson(t *testing.T) {
	tests := []struct {
		name       string
		args       string
		wantPerson bool
		wantErr    string
	}{
		{name: "valid question", args: `{"question":"How much?"}`, wantPerson: true, wantErr: "needs a person"},
		{name: "missing question", args: `{}`, wantErr: "question is required"},
		{name: "unknown field", args: `{"question":"q","amount":3}`, wantErr: `unknown field "amount"`},
		{name: "wrong type", args: `{"question":3}`, wantErr: "question must be a string, not number"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := call(t, builtin.AskOperator{}, tt.args)
			checkResult(t, got, err, "", tt.wantErr)
			if gotPerson := errors.Is(err, builtin.ErrNeedsPerson); gotPerson != tt.wantPerson {
				t.Errorf("errors.Is(%v, ErrNeedsPerson) = %v, want %v", err, gotPerson, tt.wantPerson)
			}
		})
	}
}

func TestAskOperatorAsks(t *testing.T) {
	spec := builtin.AskOperator{}.Spec()
	schema := compile(t, spec.Asks)
	tests := []struct {
		answer string
		want   bool
	}{
		{`{"amount":1}`, true},
		{`{"amount":2500,"note":"partial refund"}`, true},
		{`{"amount":2500,"note":"` + strings.Repeat("n", 500) + `"}`, true},
		{`{"amount":2500,"note":"` + strings.Repeat("n", 501) + `"}`, false},
		{`{"amount":0}`, false},
		{`{"amount":1.5}`, false},
		{`{"amount":"12"}`, false},
		{`{"note":"no amount"}`, false},
		{`{"amount":1,"extra":true}`, false},
		{`[]`, false},
	}
	for _, tt := range tests {
		if got := valid(t, schema, tt.answer); got != tt.want {
			t.Errorf("answer %.60s valid = %v, want %v", tt.answer, got, tt.want)
		}
	}
	var asks struct {
		Properties map[string]struct {
			Title string `json:"title"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(spec.Asks, &asks); err != nil {
		t.Fatal(err)
	}
	for field, want := range map[string]string{"amount": "Amount (cents)", "note": "Note"} {
		if got := asks.Properties[field].Title; got != want {
			t.Errorf("title of %s = %q, want %q", field, got, want)
		}
	}
}

// TestSchemasAgreeWithDecoding checks that what each tool's Parameters
// schema accepts is what its own strict decoding accepts, so that the model
// is never told one thing and held to another.
func TestSchemasAgreeWithDecoding(t *testing.T) {
	tools := builtin.Registry(builtin.Tools(newFakeOrders(order1))...)
	tests := []struct {
		tool string
		args string
	}{
		{builtin.NameLookupOrder, `{"order_id":"ORD-1"}`},
		{builtin.NameLookupOrder, `{"order_id":""}`},
		{builtin.NameLookupOrder, `{"order_id":7}`},
		{builtin.NameLookupOrder, `{"id":"ORD-1"}`},
		{builtin.NameLookupOrder, `{}`},
		{builtin.NameRefundOrder, `{"order_id":"ORD-1","amount_cents":10,"reason":"r"}`},
		{builtin.NameRefundOrder, `{"order_id":"ORD-1","amount_cents":10.0}`},
		{builtin.NameRefundOrder, `{"order_id":"ORD-1","amount_cents":10.5}`},
		{builtin.NameRefundOrder, `{"order_id":"ORD-1","amount_cents":0}`},
		{builtin.NameRefundOrder, `{"order_id":"ORD-1","amount_cents":"10"}`},
		{builtin.NameRefundOrder, `{"order_id":"ORD-1","reason":"` + strings.Repeat("r", 501) + `"}`},
		{builtin.NameRefundOrder, `{"order_id":"ORD-1","note":"x"}`},
		{builtin.NameAskOperator, `{"question":"q"}`},
		{builtin.NameAskOperator, `{"question":""}`},
		{builtin.NameAskOperator, `{"question":"q","x":1}`},
		{builtin.NameSlowTask, `{"seconds":0}`},
		{builtin.NameSlowTask, `{"seconds":0,"label":"warm up"}`},
		{builtin.NameSlowTask, `{"seconds":-1}`},
		{builtin.NameSlowTask, `{"seconds":121}`},
		{builtin.NameSlowTask, `{"seconds":"1"}`},
		{builtin.NameSlowTask, `{"label":"x"}`},
		{builtin.NameSlowTask, `{"seconds":0,"label":3}`},
	}
	for _, tt := range tests {
		t.Run(tt.tool+" "+tt.args, func(t *testing.T) {
			tool := tools[tt.tool]
			schemaOK := valid(t, compile(t, tool.Spec().Parameters), tt.args)
			_, err := call(t, tool, tt.args)
			toolOK := err == nil || !strings.Contains(err.Error(), "invalid arguments")
			if schemaOK != toolOK {
				t.Errorf("schema accepts = %v, tool accepts = %v (error %v)", schemaOK, toolOK, err)
			}
		})
	}
}

// TestRefundOrderPreview: the preview says what a call would pay out and
// to whom, pays nothing, and fails where the call would.
func TestRefundOrderPreview(t *testing.T) {
	orders := newFakeOrders(order1)
	tool := builtin.NewRefundOrder(orders)
	for _, tt := range []struct {
		args, want, wantErr string
	}{
		{`{"order_id":"ORD-1","reason":"damaged"}`, "Refund 50.00 EUR of ORD-1 to Ada Lovelace (damaged)", ""},
		{`{"order_id":"ORD-1","amount_cents":1250}`, "Refund part of the order: 12.50 EUR of ORD-1 to Ada Lovelace", ""},
		{`{"order_id":"ORD-9"}`, "", "order ORD-9 not found"},
		{`{"order_id":"ORD-1","amount_cents":9000}`, "", "amount_cents must be between 1 and 5000"},
	} {
		got, err := tool.Preview(context.Background(), runtime.Invocation{RunID: 7, CallID: "c", Arguments: json.RawMessage(tt.args)})
		if got != tt.want || (tt.wantErr == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tt.wantErr)) {
			t.Errorf("Preview(%s) = %q, %v; want %q, error %q", tt.args, got, err, tt.want, tt.wantErr)
		}
	}
	if n := len(orders.Refunds()); n != 0 {
		t.Errorf("%d refunds after previews, want none", n)
	}
}
