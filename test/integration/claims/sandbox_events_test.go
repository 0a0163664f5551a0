//go:build integration

package claims_test

import (
	"testing"

	. "github.com/onsi/gomega"

	"github.com/sandgate-dev/sandgate/internal/testing/builders"
	"github.com/sandgate-dev/sandgate/test/framework"
)

// TestWarmClaimAddsNoSandboxEvents: a warm member records its pod's creation and its
// readiness when the pool makes it, before any claim; binding it records nothing on the
// Sandbox (the public controller records no event on adoption either). So a warm claim's path
// costs no event write of the Sandbox controller, and a cold claim's Sandbox records the same
// two on the claim's path (docs/design.md "Sandbox events").
func TestWarmClaimAddsNoSandboxEvents(t *testing.T) {
	e := setup(t, 0)
	e.create(builders.MakeTemplate("tmpl", e.ns).Obj())
	e.create(builders.MakePool("pool", e.ns, "tmpl").Replicas(1).Obj())
	member := e.waitPoolReady("pool", 1)[0].Name
	started := []string{"SandboxPodCreated", "SandboxReady"}
	e.eventually(func(g Gomega) {
		g.Expect(e.events(g, "Sandbox", member)).To(ConsistOf(started))
	})

	e.create(builders.MakeClaim("warm", e.ns, "pool").Obj())
	_, sb := e.waitClaimReady("warm")
	e.g.Expect(sb.Name).To(Equal(member))
	e.consistently(framework.Quiet, func(g Gomega) {
		g.Expect(e.events(g, "Sandbox", member)).To(ConsistOf(started), "events on the bound member")
	})

	// With the pool emptied and nothing refilled in time, the next claim starts cold.
	e.patch(e.pool(e.g, "pool"), `{"spec":{"replicas":0}}`)
	e.create(builders.MakeClaim("cold", e.ns, "pool").Obj())
	_, cold := e.waitClaimReady("cold")
	e.eventually(func(g Gomega) {
		g.Expect(e.events(g, "Sandbox", cold.Name)).To(ConsistOf(started))
	})
}
