package builders

import (
	"testing"

	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
)

func TestCollidingNameCollides(t *testing.T) {
	const victim = "victim"
	got := CollidingName(victim)
	if got == victim || agentsv1beta1.NameHash(got) != agentsv1beta1.NameHash(victim) {
		t.Fatalf("CollidingName(%q) = %q with hash %s, want another name with hash %s",
			victim, got, agentsv1beta1.NameHash(got), agentsv1beta1.NameHash(victim))
	}
}
