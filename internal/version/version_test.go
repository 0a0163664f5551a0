package version

import (
	"strings"
	"testing"
)

func TestGetFillsEveryField(t *testing.T) {
	i := Get()
	for name, v := range map[string]string{
		"GitVersion": i.GitVersion, "GitCommit": i.GitCommit, "BuildDate": i.BuildDate,
		"GoVersion": i.GoVersion, "Compiler": i.Compiler, "Platform": i.Platform,
	} {
		if v == "" {
			t.Errorf("%s is empty; want a value or %q", name, unknown)
		}
	}
}

func TestLinkerFlagsWin(t *testing.T) {
	defer func(v, c, d string) { gitVersion, gitCommit, buildDate = v, c, d }(gitVersion, gitCommit, buildDate)
	gitVersion, gitCommit, buildDate = "v9.9.9", "abc123", "2026-11-24T00:00:00Z"
	i := Get()
	if i.GitVersion != "v9.9.9" || i.GitCommit != "abc123" || i.BuildDate != "2026-11-24T00:00:00Z" {
		t.Errorf("Get() = %+v, want the -X values", i)
	}
	if s := i.String("sandgate"); !strings.HasPrefix(s, "sandgate, version v9.9.9 (revision: abc123)") {
		t.Errorf("String = %q", s)
	}
}
