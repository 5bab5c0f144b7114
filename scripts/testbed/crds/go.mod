// The CustomResourceDefinitions the test bed applies, taken from the projects' own
// modules (never built: scripts/real-cluster.sh reads their manifests from the module
// cache, found with `go mod download -json`).
module fleetscaler.dev/testbed/crds

go 1.24.0

// Also the source of the test bed's build of upstream cluster-autoscaler's apis module
// (see scripts/testbed/autoscaler/go.mod).
require (
	k8s.io/autoscaler/cluster-autoscaler/apis v0.0.0-20240627115740-d52e4b9665d7
	github.com/openshift/api v0.0.0-20260318185450-1f2fa3f09f4e
	github.com/openshift/cluster-autoscaler-operator v0.0.1-0.20260608074635-5c8643284941
	sigs.k8s.io/cluster-api v1.14.2
)
