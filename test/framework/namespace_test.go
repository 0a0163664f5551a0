package framework

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

func TestNamespaceNameIsAValidLabelFromTheTestName(t *testing.T) {
	for _, sub := range []string{"Plain", "with spaces_and/Slashes", strings.Repeat("very long name ", 10)} {
		t.Run(sub, func(t *testing.T) {
			got := NamespaceName(t)
			if errs := validation.IsDNS1123Label(got); len(errs) > 0 {
				t.Errorf("NamespaceName = %q, not a DNS label: %v", got, errs)
			}
			if !strings.HasPrefix(got, "testnamespacenameisavalidlabelfromthetestname-") {
				t.Errorf("NamespaceName = %q, want it to start with the test's name", got)
			}
			if other := NamespaceName(t); other == got {
				t.Errorf("NamespaceName returned %q twice: want a random suffix", got)
			}
		})
	}
}
