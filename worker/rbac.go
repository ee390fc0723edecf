package worker

// The worker's rights. It watches SftpWatches, Transfers, AuditSinks,
// FileExpectations, the HolidayCalendars they name and the connections
// (its cache), writes their status
// and events about them, makes the Transfers of watches' spec.transfer,
// and reads what they name when it needs it: the connection's Secret, a
// signing Secret, an OpenPGP key's Secret, a sink's Service or Knative
// object (never listed or watched).

// +kubebuilder:rbac:groups=sftpgate.dev,resources=sftpwatches;transfers;sftpconnections;ftpconnections;objectstores;auditsinks;fileexpectations;holidaycalendars,verbs=get;list;watch
// +kubebuilder:rbac:groups=sftpgate.dev,resources=sftpwatches/status;transfers/status;auditsinks/status;fileexpectations/status,verbs=patch
// +kubebuilder:rbac:groups=sftpgate.dev,resources=transfers,verbs=create
// +kubebuilder:rbac:groups="",resources=secrets;services,verbs=get
// +kubebuilder:rbac:groups=eventing.knative.dev,resources=brokers,verbs=get
// +kubebuilder:rbac:groups=messaging.knative.dev,resources=channels,verbs=get
// +kubebuilder:rbac:groups=serving.knative.dev,resources=services,verbs=get
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// In its own namespace only: the Leases that divide the work among its
// replicas (package shard), and the ConfigMaps that keep the watches'
// state and the transfers' plans (package statestore), and the stored
// audit records (package auditstore), marked once delivered.

// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;list;watch;create;update;delete,namespace=system
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch;create;update;patch;delete;deletecollection,namespace=system

// Namespaces' labels (their metadata alone, in its cache) say which are
// web UI accounts', held to smaller budgets (package tenants).

// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch
