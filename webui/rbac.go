package webui

// The web UI's rights. Cluster-wide it may only create namespaces (and
// list them, to count the accounts' against the accounts' total), ask
// the API server what a member may do, and bind TenantRole and the team
// roles: each account's namespace gets a RoleBinding of TenantRole at
// sign-up, and one of a team role for each member. An admission policy
// (config/rbac/webui/binding_policy.yaml) lets the UI make those
// bindings only (no other role, even one RBAC would let it bind), in
// account namespaces only, TenantRole to itself only and the team roles
// to its people and groups only; so the UI reaches Secrets,
// SftpConnections and ApiKeys there and nowhere else in the cluster. It keeps the account
// Secrets in a namespace of their own (config/accounts, where a Role
// grants it that), so it reads no Secret of sftpgate's own namespace.

// +kubebuilder:rbac:groups="",resources=namespaces,verbs=create;list
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=rolebindings,verbs=create
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=clusterroles,verbs=bind,resourceNames=sftpgate-webui-tenant;sftpgate-team-viewer;sftpgate-team-editor;sftpgate-team-admin

// A team's members act through the UI with the rights a team role grants
// them in the account's namespace: the UI asks the API server whether
// they may, before each action (teams.go).

// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

// In sftpgate's own namespace, the ConfigMaps that keep the audit
// records of what accounts do (package auditstore): made, and read back
// for their Activity pages.

// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;create,namespace=system

// TenantRole is the ClusterRole (config/rbac/webui/tenant_role.yaml) the UI
// is bound to in each account's namespace.
const TenantRole = "sftpgate-webui-tenant"
