package manifests

import (
	"testing"

	lua "github.com/yuin/gopher-lua"

	"github.com/sftpgate/sftpgate/hack/kustomize"
)

// TestArgoCDHealth runs the health checks config/argocd gives Argo CD on
// status samples, as Argo CD does: obj in, {status, message} out.
func TestArgoCDHealth(t *testing.T) {
	objects, err := kustomize.Render("config/argocd")
	if err != nil {
		t.Fatal(err)
	}
	if len(objects) != 1 || objects[0].GetName() != "argocd-cm" {
		t.Fatalf("config/argocd renders %d objects", len(objects))
	}
	data := objects[0].Object["data"].(map[string]any)
	ready := func(status, reason string, observed int64) map[string]any {
		return map[string]any{"type": "Ready", "status": status, "reason": reason, "message": reason + " says why", "observedGeneration": observed}
	}
	// message is optional in a condition's schema.
	unexplained := func(status, reason string, observed int64) map[string]any {
		c := ready(status, reason, observed)
		delete(c, "message")
		return c
	}
	for _, kind := range []string{"SftpConnection", "ApiKey"} {
		script, ok := data["resource.customizations.health.sftpgate.dev_"+kind].(string)
		if !ok {
			t.Fatalf("no health check for %s", kind)
		}
		for _, tc := range []struct {
			name       string
			conditions []any
			generation int64
			want       string
			message    string // when it matters
		}{
			{"new, not yet seen", nil, 1, "Progressing", ""},
			{"ready", []any{ready("True", "Connected", 2)}, 2, "Healthy", ""},
			{"ready for an older generation", []any{ready("True", "Connected", 1)}, 2, "Progressing", ""},
			{"failed", []any{ready("False", "AuthenticationFailed", 3)}, 3, "Degraded", "AuthenticationFailed: AuthenticationFailed says why"},
			{"failed, no message", []any{unexplained("False", "AuthenticationFailed", 3)}, 3, "Degraded", "AuthenticationFailed"},
			{"ready, no message", []any{unexplained("True", "Connected", 2)}, 2, "Healthy", ""},
			{"unknown", []any{ready("Unknown", "Testing", 1)}, 1, "Progressing", ""},
		} {
			obj := map[string]any{"metadata": map[string]any{"generation": tc.generation}, "status": map[string]any{}}
			if tc.conditions != nil {
				obj["status"] = map[string]any{"conditions": tc.conditions}
			}
			status, message := health(t, script, obj)
			if status != tc.want || message == "" {
				t.Errorf("%s, %s: %s %q, want %s", kind, tc.name, status, message, tc.want)
			}
			if tc.message != "" && message != tc.message {
				t.Errorf("%s, %s: message %q, want %q", kind, tc.name, message, tc.message)
			}
		}
	}
}

func health(t *testing.T, script string, obj map[string]any) (status, message string) {
	t.Helper()
	state := lua.NewState()
	defer state.Close()
	state.SetGlobal("obj", toLua(state, obj))
	if err := state.DoString(script); err != nil {
		t.Fatal(err)
	}
	hs, ok := state.Get(-1).(*lua.LTable)
	if !ok {
		t.Fatalf("the health check returned %v", state.Get(-1))
	}
	// A field the script did not set is nil, which String would make "nil".
	str := func(v lua.LValue) string {
		if s, ok := v.(lua.LString); ok {
			return string(s)
		}
		return ""
	}
	return str(hs.RawGetString("status")), str(hs.RawGetString("message"))
}

// toLua converts JSON-like Go values as Argo CD does: objects and arrays
// to tables, numbers to numbers.
func toLua(l *lua.LState, v any) lua.LValue {
	switch v := v.(type) {
	case map[string]any:
		t := l.NewTable()
		for k, e := range v {
			t.RawSetString(k, toLua(l, e))
		}
		return t
	case []any:
		t := l.NewTable()
		for _, e := range v {
			t.Append(toLua(l, e))
		}
		return t
	case string:
		return lua.LString(v)
	case int64:
		return lua.LNumber(v)
	case bool:
		return lua.LBool(v)
	}
	return lua.LNil
}
