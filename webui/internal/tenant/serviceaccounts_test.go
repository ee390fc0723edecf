package tenant

import (
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"
)

// TestCallerRBAC: the Role the connection page shows grants the
// connection's commands, and only its, and the RoleBinding gives it to a
// ServiceAccount.
func TestCallerRBAC(t *testing.T) {
	docs := strings.Split(callerRBAC("team", "reports"), "---\n")
	if len(docs) != 2 {
		t.Fatalf("%d documents, want a Role and a RoleBinding", len(docs))
	}
	var role rbacv1.Role
	var binding rbacv1.RoleBinding
	if err := yaml.UnmarshalStrict([]byte(docs[0]), &role); err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict([]byte(docs[1]), &binding); err != nil {
		t.Fatal(err)
	}
	rule := role.Rules[0]
	if role.Kind != "Role" || role.Namespace != "team" || len(role.Rules) != 1 || rule.APIGroups[0] != "sftpgate.dev" ||
		rule.Resources[0] != "sftpconnections/commands" || rule.ResourceNames[0] != "reports" {
		t.Errorf("the Role: %+v", role)
	}
	if binding.Kind != "RoleBinding" || binding.RoleRef.Name != role.Name || binding.Subjects[0].Kind != rbacv1.ServiceAccountKind {
		t.Errorf("the RoleBinding: %+v", binding)
	}
}
