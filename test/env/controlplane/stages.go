package controlplane

import (
	"embed"
	"fmt"
	"strings"
)

// stageFiles holds the kwok Stage objects the cluster runs kwok with: nodes.yaml for every
// profile plus the profile's pod stages (profileStages).
//
//go:embed stages/*.yaml
var stageFiles embed.FS

// profileStages are the files of each profile's pod stages, in stages/.
var profileStages = map[Profile][]string{
	ProfileFast:      {"pods-fast.yaml"},
	ProfileKubelet:   {"pods-kubelet.yaml", "pods-kubelet-end.yaml"},
	ProfileRealistic: {"pods-realistic.yaml", "pods-kubelet-end.yaml"},
}

// kwokStages returns the kwok configuration (a multi-document YAML stream of
// kwok.x-k8s.io/v1alpha1 Stage objects) that simulates nodes and pods for profile, with
// startup the start-up times of ProfileRealistic.
func kwokStages(profile Profile, startup PodStartup) ([]byte, error) {
	if err := CheckProfile(profile, startup); err != nil {
		return nil, err
	}
	var b strings.Builder
	for _, name := range append([]string{"nodes.yaml"}, profileStages[profile]...) {
		data, err := stageFiles.ReadFile("stages/" + name)
		if err != nil {
			return nil, fmt.Errorf("read embedded stages %s: %w", name, err)
		}
		if name == "pods-realistic.yaml" {
			data = realisticStages(data, startup)
		}
		b.WriteString("# from test/env/controlplane/stages/" + name + "\n")
		b.Write(data)
		if !strings.HasSuffix(b.String(), "\n") {
			b.WriteByte('\n')
		}
	}
	return []byte(b.String()), nil
}
