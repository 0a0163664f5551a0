package controlplane

import (
	"embed"
	"fmt"
	"strings"
)

// stageFiles holds the kwok Stage objects the cluster runs kwok with: nodes.yaml for every
// profile plus pods-<profile>.yaml.
//
//go:embed stages/*.yaml
var stageFiles embed.FS

// kwokStages returns the kwok configuration (a multi-document YAML stream of
// kwok.x-k8s.io/v1alpha1 Stage objects) that simulates nodes and pods for profile.
func kwokStages(profile Profile) ([]byte, error) {
	if err := profile.validate(); err != nil {
		return nil, err
	}
	var b strings.Builder
	for _, name := range []string{"nodes.yaml", "pods-" + string(profile) + ".yaml"} {
		data, err := stageFiles.ReadFile("stages/" + name)
		if err != nil {
			return nil, fmt.Errorf("read embedded stages %s: %w", name, err)
		}
		b.WriteString("# from test/env/controlplane/stages/" + name + "\n")
		b.Write(data)
		if !strings.HasSuffix(b.String(), "\n") {
			b.WriteByte('\n')
		}
	}
	return []byte(b.String()), nil
}
