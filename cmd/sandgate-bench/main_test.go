package main

import (
	"io"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseFlagsSerial(t *testing.T) {
	o, err := parseFlags([]string{"--serial", "50", "--burst-size", "7", "--warmpool-size", "60"}, io.Discard)
	if err != nil {
		t.Fatalf("parseFlags: %v", err)
	}
	want := []int{1, 50, 60}
	if diff := cmp.Diff(want, []int{o.burstSize, o.totalBursts, o.warmPoolSize}); diff != "" {
		t.Errorf("--serial 50: burst size, bursts, pool mismatch (-want +got):\n%s", diff)
	}
}

func TestParseFlagsRejects(t *testing.T) {
	cases := map[string][]string{
		"zero qps":                   {"--qps", "0"},
		"zero bursts":                {"--total-bursts", "0"},
		"unknown profile":            {"--profile", "slow"},
		"render without out":         {"--scenarios", "all", "--render"},
		"scenarios on a remote":      {"--scenarios", "all", "--kubeconfig", "/tmp/k"},
		"stray positional arguments": {"extra"},
		"floor on a remote cluster":  {"--floor", "--kubeconfig", "/tmp/k"},
		"floor with nothing to fill": {"--floor", "--operator-cmd", "none"},
		"floor without webhooks":     {"--floor", "--webhooks=false"},
		"floor of the scenarios":     {"--floor", "--scenarios", "all"},
	}
	for name, args := range cases {
		t.Run(name, func(t *testing.T) {
			if _, err := parseFlags(args, io.Discard); err == nil {
				t.Errorf("parseFlags(%q) succeeded, want an error", args)
			}
		})
	}
}

func TestSelectScenarios(t *testing.T) {
	cases := []struct {
		name      string
		list      string
		scalePool int
		want      []string
		wantErr   bool
	}{
		{name: "all in order", list: "all", scalePool: 5000, want: []string{"serial", "burst-100", "burst", "burst-v1beta1", "kubelet", "scale-50", "scale-5000"}},
		{name: "shrunk large pool", list: "all", scalePool: 2000, want: []string{"serial", "burst-100", "burst", "burst-v1beta1", "kubelet", "scale-50", "scale-2000"}},
		{name: "scale-large alias", list: "scale-50, scale-large", scalePool: 3000, want: []string{"scale-50", "scale-3000"}},
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
