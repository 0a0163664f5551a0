//go:build tools

package sdk

// The public sandbox-router's command, pinned by this module's go.mod at the version the suite
// tests: hack/install-sandbox-router.sh builds it from here.
import _ "sigs.k8s.io/agent-sandbox/sandbox-router/cmd"
