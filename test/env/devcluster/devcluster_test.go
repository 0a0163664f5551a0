package devcluster

import (
	"flag"
	"path/filepath"
	"testing"
	"time"

	"github.com/sandgate-dev/sandgate/test/env/controlplane"
)

func TestValidate(t *testing.T) {
	o := DefaultOptions()
	if err := o.validate(); err != nil {
		t.Fatalf("validate of the defaults: %v", err)
	}
	if !filepath.IsAbs(o.Kubeconfig) {
		t.Errorf("validate left the kubeconfig path %q relative", o.Kubeconfig)
	}
	cases := map[string]func(*Options){
		"no nodes":         func(o *Options) { o.Nodes = 0 },
		"unknown profile":  func(o *Options) { o.Profile = "slow" },
		"empty kubeconfig": func(o *Options) { o.Kubeconfig = "" },
		"start-up times on the fast profile": func(o *Options) {
			o.PodStartup = controlplane.PodStartup{Median: time.Second, P99: 4 * time.Second}
		},
		"p99 below the median": func(o *Options) {
			o.Profile = controlplane.ProfileRealistic
			o.PodStartup = controlplane.PodStartup{Median: 4 * time.Second, P99: time.Second}
		},
	}
	for name, change := range cases {
		t.Run(name, func(t *testing.T) {
			o := DefaultOptions()
			change(&o)
			if err := o.validate(); err == nil {
				t.Errorf("validate of %+v succeeded, want an error", o)
			}
		})
	}
}

func TestAddFlags(t *testing.T) {
	o := DefaultOptions()
	fs := flag.NewFlagSet("sandgate-dev", flag.ContinueOnError)
	o.AddFlags(fs)
	if err := fs.Parse([]string{"--nodes", "5", "--profile", "realistic", "--pod-startup-median", "1s", "--pod-startup-p99", "5s",
		"--pod-startup-seed", "3", "--kubeconfig", "k", "--webhooks"}); err != nil {
		t.Fatalf("parse: %v", err)
	}
	want := Options{
		Nodes: 5, Profile: controlplane.ProfileRealistic, Kubeconfig: "k", Webhooks: true,
		PodStartup: controlplane.PodStartup{Median: time.Second, P99: 5 * time.Second, Seed: 3},
	}
	if o != want {
		t.Errorf("options after the flags = %+v, want %+v", o, want)
	}
	if err := o.validate(); err != nil {
		t.Errorf("validate: %v", err)
	}
}
