package manifests

import (
	"testing"

	lua "github.com/yuin/gopher-lua"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"

	"github.com/sftpgate/sftpgate/hack/kustomize"
)

// TestArgoCDHealth runs the health checks config/argocd gives Argo CD on
// status samples, as Argo CD does (obj in, {status, message} out), and
// checks that each agrees with kstatus's own computation: Current is
// Healthy, InProgress Progressing, Failed Degraded.
func TestArgoCDHealth(t *testing.T) {
	objects, err := kustomize.Render("config/argocd")
	if err != nil {
		t.Fatal(err)
	}
	if len(objects) != 1 || objects[0].GetName() != "argocd-cm" {
		t.Fatalf("config/argocd renders %d objects", len(objects))
	}
	data := objects[0].Object["data"].(map[string]any)
	condition := func(kind, status, reason string) map[string]any {
		return map[string]any{"type": kind, "status": status, "reason": reason, "message": reason + " says why", "observedGeneration": int64(2)}
	}
	ready := func(status, reason string) map[string]any { return condition("Ready", status, reason) }
	// message is optional in a condition's schema.
	unexplained := func(c map[string]any) map[string]any {
		delete(c, "message")
		return c
	}
	agrees := map[kstatus.Status]string{kstatus.CurrentStatus: "Healthy", kstatus.InProgressStatus: "Progressing", kstatus.FailedStatus: "Degraded"}
	for _, kind := range []string{"SftpConnection", "ApiKey", "SftpWatch", "Transfer", "TransferSchedule", "ObjectStore", "FtpConnection", "AuditSink", "ShareLink", "FileExpectation"} {
		script, ok := data["resource.customizations.health.sftpgate.dev_"+kind].(string)
		if !ok {
			t.Fatalf("no health check for %s", kind)
		}
		for _, tc := range []struct {
			name       string
			observed   int64 // status.observedGeneration; the generation is 2
			conditions []any
			want       string
			message    string // when it matters
		}{
			{"new, not yet seen (the CRD defaults observedGeneration to 0)", 0, nil, "Progressing", ""},
			{"a test of the new spec waits", 2, []any{condition("Reconciling", "True", "TestPending")}, "Progressing", "TestPending: TestPending says why"},
			{"ready", 2, []any{ready("True", "Connected")}, "Healthy", ""},
			{"ready, no message", 2, []any{unexplained(ready("True", "Connected"))}, "Healthy", ""},
			{"ready, being tested again with a new Secret", 2, []any{ready("True", "Connected"), condition("Reconciling", "True", "Testing")}, "Progressing", ""},
			{"ready for an older generation", 1, []any{ready("True", "Connected")}, "Progressing", ""},
			{"failing, retried", 2, []any{ready("False", "ConnectionRefused")}, "Progressing", "ConnectionRefused: ConnectionRefused says why"},
			{"stalled", 2, []any{ready("False", "AuthenticationFailed"), condition("Stalled", "True", "AuthenticationFailed")}, "Degraded",
				"AuthenticationFailed: AuthenticationFailed says why"},
			{"stalled, no message", 2, []any{unexplained(ready("False", "Expired")), unexplained(condition("Stalled", "True", "Expired"))}, "Degraded", "Expired"},
			{"unknown", 2, []any{ready("Unknown", "Testing")}, "Progressing", ""},
		} {
			obj := map[string]any{"apiVersion": "sftpgate.dev/v1alpha1", "kind": kind, "metadata": map[string]any{"name": "x", "generation": int64(2)},
				"status": map[string]any{"observedGeneration": tc.observed}}
			if tc.conditions != nil {
				obj["status"].(map[string]any)["conditions"] = tc.conditions
			}
			status, message := health(t, script, obj)
			if status != tc.want || message == "" {
				t.Errorf("%s, %s: %s %q, want %s", kind, tc.name, status, message, tc.want)
			}
			if tc.message != "" && message != tc.message {
				t.Errorf("%s, %s: message %q, want %q", kind, tc.name, message, tc.message)
			}
			computed, err := kstatus.Compute(&unstructured.Unstructured{Object: obj})
			if err != nil {
				t.Fatal(err)
			}
			if agrees[computed.Status] != status {
				t.Errorf("%s, %s: Argo CD says %s, kstatus %s", kind, tc.name, status, computed.Status)
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
