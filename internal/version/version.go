// Package version is the build identity of the sandgate binary: what --version prints and
// what the agent_sandbox_build_info metric carries. Builds set it with
// -ldflags "-X github.com/sandgate-dev/sandgate/internal/version.gitVersion=v1.2.3 ..."
// (the Dockerfile does); without that it comes from what the Go toolchain stamped into the
// binary (module version, VCS revision and time), else "unknown".
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Set with -ldflags -X; empty means "take it from the build info".
var (
	gitVersion string
	gitCommit  string
	buildDate  string
)

const unknown = "unknown"

// Info is the build identity. Its fields are the labels of agent_sandbox_build_info.
type Info struct {
	GitVersion string
	GitCommit  string
	BuildDate  string
	GoVersion  string
	Compiler   string
	Platform   string
}

// Get returns the binary's build identity.
func Get() Info {
	info := Info{
		GitVersion: gitVersion,
		GitCommit:  gitCommit,
		BuildDate:  buildDate,
		GoVersion:  runtime.Version(),
		Compiler:   runtime.Compiler,
		Platform:   runtime.GOOS + "/" + runtime.GOARCH,
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if info.GitVersion == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			info.GitVersion = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch {
			case s.Key == "vcs.revision" && info.GitCommit == "":
				info.GitCommit = s.Value
			case s.Key == "vcs.time" && info.BuildDate == "":
				info.BuildDate = s.Value
			}
		}
	}
	for _, f := range []*string{&info.GitVersion, &info.GitCommit, &info.BuildDate} {
		if *f == "" {
			*f = unknown
		}
	}
	return info
}

// String is the text --version prints for the named program.
func (i Info) String(program string) string {
	return fmt.Sprintf("%s, version %s (revision: %s)\n  build date:  %s\n  go version:  %s\n  compiler:    %s\n  platform:    %s\n",
		program, i.GitVersion, i.GitCommit, i.BuildDate, i.GoVersion, i.Compiler, i.Platform)
}
