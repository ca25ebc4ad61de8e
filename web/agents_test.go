package web

import "testing"

// The media types PUT /api/agents/:identifier takes, and the Accept
// headers that get the file rather than JSON from GET.
func TestAgentMediaTypes(t *testing.T) {
	for _, tt := range []struct {
		contentType string
		want        bool
	}{
		{"application/yaml", true},
		{"application/yaml; charset=utf-8", true},
		{"Application/YAML", true},
		{"application/x-yaml", true},
		{"text/yaml", true},
		{"text/x-yaml", true},
		{"application/json", false},
		{"text/plain", false},
		{"", false},
		{"application/yaml; charset", false}, // malformed parameters
		{"application/yamlx", false},
	} {
		if got := isYAML(tt.contentType); got != tt.want {
			t.Errorf("isYAML(%q) = %t, want %t", tt.contentType, got, tt.want)
		}
	}
	for _, tt := range []struct {
		accept string
		want   bool
	}{
		{"application/yaml", true},
		{"application/json, application/yaml;q=0.5", true},
		{"text/yaml", true},
		{"*/*", false},
		{"application/json", false},
		{"", false},
	} {
		if got := acceptsYAML(tt.accept); got != tt.want {
			t.Errorf("acceptsYAML(%q) = %t, want %t", tt.accept, got, tt.want)
		}
	}
}
