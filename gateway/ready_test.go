package gateway

import (
	"errors"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/gateway/answer"
)

// TestReadyNamesAFailedTest: a connection whose test failed is refused
// with the test's reason, though it never had a root (no test of it ever
// passed), not as one still being tested.
func TestReadyNamesAFailedTest(t *testing.T) {
	t.Parallel()
	conn := func(status metav1.ConditionStatus, generation int64, root string) *v1alpha1.SftpConnection {
		c := &v1alpha1.SftpConnection{ObjectMeta: metav1.ObjectMeta{Generation: 2}, Status: v1alpha1.SftpConnectionStatus{RootPath: root}}
		if status != "" {
			c.Status.Conditions = []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: status, ObservedGeneration: generation,
				Reason: "AuthenticationFailed", Message: "the server refused the password"}}
		}
		return c
	}
	for _, tc := range []struct {
		name string
		conn *v1alpha1.SftpConnection
		want string // "" for none
	}{
		{"never tested", conn("", 0, ""), "being tested"},
		{"failed, never passed", conn(metav1.ConditionFalse, 2, ""), "not ready (AuthenticationFailed): the server refused the password"},
		{"failed, passed before", conn(metav1.ConditionFalse, 2, "/home/x"), "not ready (AuthenticationFailed)"},
		{"changed since its test", conn(metav1.ConditionFalse, 1, ""), "being tested"},
		{"ready, its root not yet written", conn(metav1.ConditionTrue, 2, ""), "being tested"},
		{"ready", conn(metav1.ConditionTrue, 2, "/home/x"), ""},
	} {
		err := ready(tc.conn)
		var a *answer.Error
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v, want none", tc.name, err)
		case tc.want != "" && (!errors.As(err, &a) || a.Code != "connection_not_ready" || !strings.Contains(a.Message, tc.want)):
			t.Errorf("%s: %v, want connection_not_ready saying %q", tc.name, err, tc.want)
		}
	}
}
