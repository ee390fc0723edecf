package controllers

import "sigs.k8s.io/controller-runtime/pkg/client"

// apiServer is the suite's client of its kube-apiserver (suite_test.go
// hands it over): what this package's own tests read and write through.
var apiServer client.Client

// UseAPIServer gives this package's own tests the suite's client.
func UseAPIServer(c client.Client) { apiServer = c }
