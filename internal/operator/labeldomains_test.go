package operator

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
)

func TestConfigNamespace(t *testing.T) {
	t.Setenv("POD_NAMESPACE", "")
	if got := configNamespace(""); got != DefaultConfigNamespace && !inCluster() {
		t.Errorf("configNamespace(\"\") outside a cluster = %s, want %s", got, DefaultConfigNamespace)
	}
	t.Setenv("POD_NAMESPACE", "from-the-pod")
	if got := configNamespace(""); got != "from-the-pod" {
		t.Errorf("configNamespace(\"\") = %s, want the pod's namespace", got)
	}
	if got := configNamespace("flag"); got != "flag" {
		t.Errorf("configNamespace(\"flag\") = %s, want the flag's", got)
	}
}

func inCluster() bool {
	_, err := os.Stat(filepath.Clean(serviceAccountNamespaceFile))
	return err == nil
}

// The file is read from data, else binaryData, as the public controller's pod sees the
// ConfigMap mounted.
func TestLabelDomainsFile(t *testing.T) {
	tests := map[string]struct {
		cm   *corev1.ConfigMap
		want string
	}{
		"data":                       {cm: &corev1.ConfigMap{Data: map[string]string{AllowedLabelDomainsKey: "a.example"}}, want: "a.example"},
		"binaryData":                 {cm: &corev1.ConfigMap{BinaryData: map[string][]byte{AllowedLabelDomainsKey: []byte("b.example")}}, want: "b.example"},
		"no file: the default":       {cm: &corev1.ConfigMap{Data: map[string]string{"other": "x"}}, want: ""},
		"an empty file in data wins": {cm: &corev1.ConfigMap{Data: map[string]string{AllowedLabelDomainsKey: ""}, BinaryData: map[string][]byte{AllowedLabelDomainsKey: []byte("b.example")}}, want: ""},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, labelDomainsFile(tc.cm)); diff != "" {
				t.Errorf("labelDomainsFile (-want +got):\n%s", diff)
			}
		})
	}
}
