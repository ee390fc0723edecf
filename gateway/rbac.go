package gateway

// The gateway's rights: it only reads. It watches SftpConnections and
// ApiKeys (its cache), and gets a connection's Secret when it builds that
// connection's pool; it cannot list or watch Secrets.

// +kubebuilder:rbac:groups=sftpgate.dev,resources=sftpconnections;apikeys,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get
