package proc

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseStat(t *testing.T) {
	cases := []struct {
		name    string
		data    string
		want    statInfo
		wantErr bool
	}{
		{
			name: "plain command",
			data: "4242 (sandgate) S 100 4242 100 0 -1 4194560 1000 0 0 0 250 75 0 0 20 0 12 0 5000 800000 3000",
			want: statInfo{ppid: 100, cpuSeconds: 3.25},
		},
		{
			name: "command name with spaces and parentheses",
			data: "7 (a (weird) name) R 1 7 7 0 -1 0 0 0 0 0 1 2 0 0 20 0 1 0 1 1 1",
			want: statInfo{ppid: 1, cpuSeconds: 0.03},
		},
		{name: "truncated", data: "7 (x) R 1 7", wantErr: true},
		{name: "no command", data: "7 x R 1", wantErr: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseStat([]byte(tc.data))
			if (err != nil) != tc.wantErr {
				t.Fatalf("parseStat error = %v, wantErr %v", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(statInfo{})); diff != "" {
				t.Errorf("parseStat mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseHWM(t *testing.T) {
	cases := []struct {
		name    string
		data    string
		want    int64
		wantErr bool
	}{
		{name: "present", data: "Name:\tsandgate\nVmPeak:\t  900 kB\nVmHWM:\t   51200 kB\nVmRSS:\t 40000 kB\n", want: 51200 * 1024},
		{name: "absent for kernel threads", data: "Name:\tkthreadd\nState:\tS\n", want: 0},
		{name: "malformed", data: "VmHWM:\t lots\n", wantErr: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseHWM([]byte(tc.data))
			if (err != nil) != tc.wantErr {
				t.Fatalf("parseHWM error = %v, wantErr %v", err, tc.wantErr)
			}
			if got != tc.want {
				t.Errorf("parseHWM = %d, want %d", got, tc.want)
			}
		})
	}
}

// TestReadSumsTheTree builds a fake /proc with a parent, a child, a grandchild and an
// unrelated process: the tree's CPU is summed and the unrelated process is left out.
func TestReadSumsTheTree(t *testing.T) {
	root := t.TempDir()
	procs := []struct {
		pid, ppid     int
		ticks, hwmKiB int
	}{
		{pid: 10, ppid: 1, ticks: 100, hwmKiB: 1000},
		{pid: 11, ppid: 10, ticks: 50, hwmKiB: 3000},
		{pid: 12, ppid: 11, ticks: 25, hwmKiB: 2000},
		{pid: 20, ppid: 1, ticks: 999, hwmKiB: 9000},
	}
	for _, p := range procs {
		dir := filepath.Join(root, strconv.Itoa(p.pid))
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		stat := strconv.Itoa(p.pid) + " (p) S " + strconv.Itoa(p.ppid) + " 0 0 0 0 0 0 0 0 0 " + strconv.Itoa(p.ticks) + " 0 0 0 20 0 1 0 1 1 1"
		status := "Name:\tp\nVmHWM:\t" + strconv.Itoa(p.hwmKiB) + " kB\n"
		if err := os.WriteFile(filepath.Join(dir, "stat"), []byte(stat), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "status"), []byte(status), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := Read(root, 10)
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	want := Usage{CPUSeconds: 1.75, PeakRSSBytes: 3000 * 1024}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Read mismatch (-want +got):\n%s", diff)
	}
	if _, err := Read(root, 99); err == nil {
		t.Errorf("Read of a missing process succeeded, want an error")
	}
	// CPUSeconds reads the one process, without its children.
	if cpu, err := CPUSeconds(root, 11); err != nil || cpu != 0.5 {
		t.Errorf("CPUSeconds(11) = %v, %v; want 0.5, nil", cpu, err)
	}
	if _, err := CPUSeconds(root, 99); err == nil {
		t.Errorf("CPUSeconds of a missing process succeeded, want an error")
	}
}

func TestReadSelf(t *testing.T) {
	u, err := Read("/proc", os.Getpid())
	if err != nil {
		t.Fatalf("Read of the test process: %v", err)
	}
	if u.PeakRSSBytes <= 0 {
		t.Errorf("peak RSS of the running test process = %d, want > 0", u.PeakRSSBytes)
	}
}
