package webui

// The web UI's rights. Cluster-wide it may only create namespaces, and
// bind one ClusterRole, TenantRole: each account's namespace gets a
// RoleBinding to it at sign-up. An admission policy
// (config/rbac/webui/tenant_binding_policy.yaml) lets that role be bound in
// account namespaces only, so the UI reaches Secrets, SftpConnections and
// ApiKeys there and nowhere else in the cluster. In its own namespace it
// keeps the account Secrets.

// +kubebuilder:rbac:groups="",resources=namespaces,verbs=create
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=rolebindings,verbs=create
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=clusterroles,verbs=bind,resourceNames=sftpgate-webui-tenant
// +kubebuilder:rbac:groups="",namespace=sftpgate-system,resources=secrets,verbs=get;create;update;delete

// TenantRole is the ClusterRole (config/rbac/webui/tenant_role.yaml) the UI
// is bound to in each account's namespace.
const TenantRole = "sftpgate-webui-tenant"
