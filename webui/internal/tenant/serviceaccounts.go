package tenant

import (
	"bytes"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
)

// callerRBAC is the Role and RoleBinding that let a ServiceAccount of the
// cluster call connection name of namespace with its projected token (the
// gateway's "Who may call"): every command, for the ServiceAccount the
// user names in place of my-app.
func callerRBAC(namespace, name string) string {
	role := rbacv1.Role{
		TypeMeta:   metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: "Role"},
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name + "-callers"},
		Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{v1alpha1.GroupVersion.Group}, Resources: []string{"sftpconnections/commands"},
			ResourceNames: []string{name}, Verbs: []string{"*"},
		}},
	}
	binding := rbacv1.RoleBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: "RoleBinding"},
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name + "-callers"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: namespace, Name: "my-app"}},
	}
	var out bytes.Buffer
	for i, obj := range []any{role, binding} {
		b, err := yaml.Marshal(obj)
		if err != nil {
			return "" // typed objects always marshal
		}
		if i > 0 {
			out.WriteString("---\n")
		}
		out.Write(bytes.ReplaceAll(b, []byte("  creationTimestamp: null\n"), nil))
	}
	return out.String()
}
