package controlplane

import (
	"fmt"
	"os"
	"path/filepath"

	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// auditLogMaxSizeMB turns off the API server's log rotation: with --audit-log-maxsize=0 it
// appends to a plain file (a positive size would rotate it through lumberjack and a reader
// could miss the events of the rotated part).
const auditLogMaxSizeMB = "0"

// configureAudit writes policy into the cluster directory and sets the API server's audit
// flags to log to AuditLogPath.
func (c *Cluster) configureAudit(args *envtest.Arguments, policy string) error {
	path := filepath.Join(c.Dir, "audit-policy.yaml")
	if err := os.WriteFile(path, []byte(policy), 0o600); err != nil {
		return fmt.Errorf("write audit policy: %w", err)
	}
	c.auditLog = true
	args.Set("audit-policy-file", path)
	args.Set("audit-log-path", c.AuditLogPath())
	args.Set("audit-log-format", "json")
	// Blocking (the default, said here because it matters): the event is written before the
	// request is answered, so a killed API server loses none it acknowledged.
	args.Set("audit-log-mode", "blocking")
	args.Set("audit-log-maxsize", auditLogMaxSizeMB)
	return nil
}

// AuditLogPath is the API server's audit log (JSON lines, one audit.k8s.io/v1 Event each),
// in the logs directory; "" when Options.AuditPolicy was empty. A restarted API server
// appends to it.
func (c *Cluster) AuditLogPath() string {
	if !c.auditLog {
		return ""
	}
	return filepath.Join(c.logDir(), "audit.log")
}
