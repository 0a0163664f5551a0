package helmchart

import (
	"bytes"
	"encoding/json"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// Reading the public agent-sandbox chart: where the module cache has it, which flag it renders
// each controller value as, and its values.yaml with every commented option set.

// publicChart returns the directory of the public agent-sandbox chart in the module cache, at
// the version test/sdk/go.mod requires (downloaded if the cache lacks it).
func publicChart(t *testing.T) string {
	t.Helper()
	cmd := exec.Command("go", "mod", "download", "-json", "sigs.k8s.io/agent-sandbox")
	cmd.Dir = filepath.Join(root(t), "test", "sdk")
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go mod download sigs.k8s.io/agent-sandbox in test/sdk: %v\n%s%s", err, out, stderr.String())
	}
	var mod struct{ Version, Dir, Error string }
	if err := json.Unmarshal(out, &mod); err != nil || mod.Error != "" || mod.Dir == "" {
		t.Fatalf("go mod download sigs.k8s.io/agent-sandbox: %v %s\n%s", err, mod.Error, out)
	}
	dir := filepath.Join(mod.Dir, "helm")
	if _, err := os.Stat(filepath.Join(dir, "Chart.yaml")); err != nil {
		t.Fatalf("sigs.k8s.io/agent-sandbox %s has no chart in helm/: %v", mod.Version, err)
	}
	return dir
}

// publicChartFlags reads which flag the public chart renders each controller value as, from
// its templates: controller value name -> flag name.
func publicChartFlags(t *testing.T, chart string) map[string]string {
	t.Helper()
	re := regexp.MustCompile(`- --([a-z0-9-]+)=\{\{ *\.Values\.controller\.([A-Za-z0-9]+) *\}\}`)
	flags := map[string]string{}
	files, _ := filepath.Glob(filepath.Join(chart, "templates", "*.tpl"))
	for _, f := range files {
		for _, m := range re.FindAllStringSubmatch(string(readFile(t, f)), -1) {
			flags[m[2]] = m[1]
		}
	}
	if len(flags) < 10 {
		t.Fatalf("found %d flags in the public chart's templates: the pattern no longer matches them", len(flags))
	}
	return flags
}

// publicValuesAsShipped returns the public chart's values.yaml as it is, with the image.tag it
// requires (and leaves empty) set.
func publicValuesAsShipped(t *testing.T) map[string]any {
	t.Helper()
	var values map[string]any
	if err := yaml.Unmarshal(readFile(t, filepath.Join(publicChart(t), "values.yaml")), &values); err != nil {
		t.Fatal(err)
	}
	set(values, "image.tag", "v0.5.6")
	return values
}

var (
	// A commented option beside the keys of its mapping: "  # name: value".
	commentedOption = regexp.MustCompile(`^(\s+)# ([A-Za-z][A-Za-z0-9]*: .*)$`)
	// A commented example whose mapping is empty: "key: {}" then "  # example lines".
	emptyMapping = regexp.MustCompile(`^(\s*)([A-Za-z][A-Za-z0-9]*): (\{\}|\[\])\s*$`)
	// A commented example of a top-level value, given whole before the value: "# key:" then
	// "#   ..." lines, then "key: null".
	exampleStart = regexp.MustCompile(`^# ([A-Za-z][A-Za-z0-9]*):\s*$`)
)

// uncommentOptions sets every commented option of a values.yaml written as the public chart's
// is, and returns the values: a commented "name: value" beside the keys of its mapping is
// uncommented; the commented lines under an empty "key: {}" become its content; a commented
// "# key:" block given as an example before "key: ..." replaces that line.
func uncommentOptions(t *testing.T, src []byte) map[string]any {
	t.Helper()
	lines := strings.Split(string(src), "\n")
	var out []string
	indentOf := func(s string) int { return len(s) - len(strings.TrimLeft(s, " ")) }
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		if m := exampleStart.FindStringSubmatch(line); m != nil {
			j := i + 1
			for j < len(lines) && strings.HasPrefix(lines[j], "#  ") {
				j++
			}
			if j < len(lines) && strings.HasPrefix(lines[j], m[1]+":") {
				for _, l := range lines[i:j] {
					out = append(out, strings.TrimPrefix(l, "# "))
				}
				i = j // the value's own line is replaced by the example
				continue
			}
		}
		if m := emptyMapping.FindStringSubmatch(line); m != nil {
			j, indent := i+1, len(m[1])
			for j < len(lines) && strings.HasPrefix(strings.TrimLeft(lines[j], " "), "# ") && indentOf(lines[j]) > indent {
				j++
			}
			if j > i+1 {
				out = append(out, m[1]+m[2]+":")
				for _, l := range lines[i+1 : j] {
					out = append(out, strings.Replace(l, "# ", "", 1))
				}
				i = j - 1
				continue
			}
		}
		if m := commentedOption.FindStringSubmatch(line); m != nil && inMapping(out, len(m[1])) {
			out = append(out, m[1]+m[2])
			continue
		}
		out = append(out, line)
	}
	var values map[string]any
	if err := yaml.Unmarshal([]byte(strings.Join(out, "\n")), &values); err != nil {
		t.Fatalf("the public values.yaml with its options uncommented does not parse: %v\n%s", err, strings.Join(out, "\n"))
	}
	return values
}

// inMapping says whether a key indented by indent, after the lines so far, sits in a block
// mapping: the last key line before it is a sibling (same indentation) or opens the mapping
// ("parent:" indented less).
func inMapping(lines []string, indent int) bool {
	for i := len(lines) - 1; i >= 0; i-- {
		l := lines[i]
		trimmed := strings.TrimSpace(l)
		if trimmed == "" || strings.HasPrefix(trimmed, "#") {
			continue
		}
		n := len(l) - len(strings.TrimLeft(l, " "))
		return n == indent || (n < indent && strings.HasSuffix(trimmed, ":"))
	}
	return false
}

// valuePaths lists the paths of values's leaves, a value publicValues covers whole counting as
// one leaf.
func valuePaths(values map[string]any, prefix string) []string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(values)) {
		path := prefix + k
		if m, ok := values[k].(map[string]any); ok && len(m) > 0 {
			if _, whole := publicValues[path]; !whole {
				out = append(out, valuePaths(m, path+".")...)
				continue
			}
		}
		out = append(out, path)
	}
	return out
}

func lookup(values map[string]any, path string) (any, bool) {
	var cur any = values
	for _, k := range strings.Split(path, ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = m[k]; !ok {
			return nil, false
		}
	}
	return cur, true
}

func set(values map[string]any, path string, v any) {
	keys := strings.Split(path, ".")
	m := values
	for _, k := range keys[:len(keys)-1] {
		next, ok := m[k].(map[string]any)
		if !ok {
			next = map[string]any{}
			m[k] = next
		}
		m = next
	}
	m[keys[len(keys)-1]] = v
}

// merge sets src's leaves over dst, as Helm merges values files.
func merge(dst, src map[string]any) {
	for k, v := range src {
		if sm, ok := v.(map[string]any); ok {
			if dm, ok := dst[k].(map[string]any); ok {
				merge(dm, sm)
				continue
			}
		}
		dst[k] = v
	}
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
