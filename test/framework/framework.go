// Package framework is what sandgate's integration tests share: RunSuite starts a local
// control plane (test/env/controlplane) for a suite's TestMain, StartManager runs the sandgate
// controllers (and webhooks) in the test process against it, and NamespaceName,
// CreateNamespace and the Timeout, Interval and Quiet bounds keep the suites alike.
//
// It takes testing.TB and testing.M, for _test.go files.
package framework

import (
	"k8s.io/client-go/rest"

	"github.com/sandgate-dev/sandgate/test/env/controlplane"
	"github.com/sandgate-dev/sandgate/webhooks"
)

// Cluster is a running local control plane that test managers run against.
type Cluster struct {
	*controlplane.Cluster
}

// operatorConfig is the manager's identity: webhooks.DefaultOperatorUser, the user the binding
// guard admits, as in an installed cluster.
func (c *Cluster) operatorConfig() (*rest.Config, error) {
	return c.UserConfig(webhooks.DefaultOperatorUser)
}
