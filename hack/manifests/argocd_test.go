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
		}{
			{"new, not yet seen", nil, 1, "Progressing"},
			{"ready", []any{ready("True", "Connected", 2)}, 2, "Healthy"},
			{"ready for an older generation", []any{ready("True", "Connected", 1)}, 2, "Progressing"},
			{"failed", []any{ready("False", "AuthenticationFailed", 3)}, 3, "Degraded"},
			{"unknown", []any{ready("Unknown", "Testing", 1)}, 1, "Progressing"},
		} {
			obj := map[string]any{"metadata": map[string]any{"generation": tc.generation}, "status": map[string]any{}}
			if tc.conditions != nil {
				obj["status"] = map[string]any{"conditions": tc.conditions}
			}
			status, message := health(t, script, obj)
			if status != tc.want || message == "" {
				t.Errorf("%s, %s: %s %q, want %s", kind, tc.name, status, message, tc.want)
			}
			if tc.want == "Degraded" && message != "AuthenticationFailed: AuthenticationFailed says why" {
				t.Errorf("%s, %s: message %q", kind, tc.name, message)
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
	return hs.RawGetString("status").String(), hs.RawGetString("message").String()
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
