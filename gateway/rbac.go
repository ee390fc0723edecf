package gateway

// The gateway's rights: it reads, and asks for reviews. It watches the
// endpoints it serves (SftpConnections, FtpConnections, ObjectStores) and
// ApiKeys (its cache), and gets an endpoint's Secret when it builds that
// endpoint's pool; it cannot list or watch Secrets.

// +kubebuilder:rbac:groups=sftpgate.dev,resources=sftpconnections;ftpconnections;objectstores;apikeys,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get

// It records when keys were last used (package lastuse): a merge patch of
// status.lastUsedTime, which the status policy lets it write and nothing
// else of the status.

// +kubebuilder:rbac:groups=sftpgate.dev,resources=apikeys/status,verbs=patch

// ServiceAccount tokens: the gateway checks them against the cluster's
// ServiceAccount issuer (its discovery document and keys, which the
// system:service-account-issuer-discovery role grants every ServiceAccount
// too), then asks the API server to verify them and RBAC to decide their
// requests (package kubeauth).

// +kubebuilder:rbac:urls=/.well-known/openid-configuration;/openid/v1/jwks,verbs=get

// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

// Resumable uploads: their records are ConfigMaps of its own namespace
// (package uploadrecord), which the worker removes once they expire.

// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;create;update;delete,namespace=system

// Namespaces' labels (their metadata alone, in its cache) say which are
// web UI accounts', held to smaller budgets (package tenants).

// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch
