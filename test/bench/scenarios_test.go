package bench

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestSelectScenarios(t *testing.T) {
	cases := []struct {
		name      string
		list      string
		scalePool int
		want      []string
		wantErr   bool
	}{
		{name: "all in order, optional ones left out", list: "all", scalePool: 5000, want: []string{"serial", "burst-100", "burst-300", "kubelet", "cold", "sustained-10", "sustained-50", "sustained-150", "scale-20k"}},
		{name: "optional by name", list: "burst-v1alpha1,admission-floor", scalePool: 5000, want: []string{"burst-v1alpha1", "admission-floor"}},
		{name: "scale-large alias", list: "serial, scale-large", scalePool: 3000, want: []string{"serial", "scale-3000"}},
		{name: "unknown", list: "serial,nope", scalePool: 5000, wantErr: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := selectScenarios(tc.list, tc.scalePool)
			if (err != nil) != tc.wantErr {
				t.Fatalf("selectScenarios error = %v, wantErr %v", err, tc.wantErr)
			}
			var names []string
			for _, s := range got {
				names = append(names, s.name)
			}
			if diff := cmp.Diff(tc.want, names); diff != "" {
				t.Errorf("scenarios mismatch (-want +got):\n%s", diff)
			}
		})
	}
}
