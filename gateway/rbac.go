package gateway

// The gateway's rights: it reads, and asks for reviews. It watches
// SftpConnections and ApiKeys (its cache), and gets a connection's Secret
// when it builds that connection's pool; it cannot list or watch Secrets.

// +kubebuilder:rbac:groups=sftpgate.dev,resources=sftpconnections;apikeys,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get

// ServiceAccount tokens: the gateway asks the API server to verify them
// and RBAC to decide their requests (package kubeauth).

// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create
