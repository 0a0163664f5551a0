package bench

import (
	"testing"
)

func TestDefaultOptionsValid(t *testing.T) {
	if err := DefaultOptions().Validate(); err != nil {
		t.Errorf("DefaultOptions().Validate() = %v, want nil", err)
	}
}

func TestValidateRejects(t *testing.T) {
	cases := map[string]func(*Options){
		"zero qps":                   func(o *Options) { o.QPS = 0 },
		"zero bursts":                func(o *Options) { o.TotalBursts = 0 },
		"negative pool":              func(o *Options) { o.WarmPoolSize = -1 },
		"unknown profile":            func(o *Options) { o.Profile = "slow" },
		"render without out":         func(o *Options) { o.Scenarios, o.Render = "all", true },
		"scenarios on a remote":      func(o *Options) { o.Scenarios, o.Kubeconfig = "all", "/tmp/k" },
		"floor admission alone":      func(o *Options) { o.FloorAdmission = true },
		"floor on a remote cluster":  func(o *Options) { o.Floor, o.Kubeconfig = true, "/tmp/k" },
		"floor with nothing to fill": func(o *Options) { o.Floor, o.OperatorCmd = true, "none" },
		"floor without webhooks":     func(o *Options) { o.Floor, o.Webhooks = true, false },
		"floor of the scenarios":     func(o *Options) { o.Floor, o.Scenarios = true, "all" },
	}
	for name, change := range cases {
		t.Run(name, func(t *testing.T) {
			o := DefaultOptions()
			change(&o)
			if err := o.Validate(); err == nil {
				t.Errorf("Validate() of %+v succeeded, want an error", o)
			}
		})
	}
}
