package webui

// The web UI's rights. Cluster-wide it may only create namespaces, and
// bind one ClusterRole, TenantRole: each account's namespace gets a
// RoleBinding to it at sign-up. An admission policy
// (config/rbac/webui/binding_policy.yaml) lets the UI make that binding
// only (no other role, even one RBAC would let it bind), in account
// namespaces only, to itself only; so the UI reaches Secrets,
// SftpConnections and ApiKeys there and nowhere else in the cluster. It keeps the account
// Secrets in a namespace of their own (config/accounts, where a Role
// grants it that), so it reads no Secret of sftpgate's own namespace.

// +kubebuilder:rbac:groups="",resources=namespaces,verbs=create
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=rolebindings,verbs=create
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=clusterroles,verbs=bind,resourceNames=sftpgate-webui-tenant

// In sftpgate's own namespace, the ConfigMaps that keep the audit
// records of what accounts do (package auditstore): made, and read back
// for their Activity pages.

// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;create,namespace=system

// TenantRole is the ClusterRole (config/rbac/webui/tenant_role.yaml) the UI
// is bound to in each account's namespace.
const TenantRole = "sftpgate-webui-tenant"
