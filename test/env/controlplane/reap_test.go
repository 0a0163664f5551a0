package controlplane

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

func TestMentionsDir(t *testing.T) {
	for _, tc := range []struct {
		cmdline string
		want    bool
	}{
		{"etcd\x00--data-dir=/tmp/s/cluster-1/etcd\x00", true},
		{"kwok\x00--config\x00/tmp/s/cluster-1\x00", true},
		{"kwok\x00--config=/tmp/s/cluster-1", true},
		{"etcd\x00--data-dir=/tmp/s/cluster-12/etcd\x00", false},
		{"etcd\x00--data-dir=/tmp/s/cluster-12/etcd\x00/tmp/s/cluster-1/x", true},
		{"sleep\x00100", false},
	} {
		if got := mentionsDir([]byte(tc.cmdline), "/tmp/s/cluster-1"); got != tc.want {
			t.Errorf("mentionsDir(%q) = %v, want %v", tc.cmdline, got, tc.want)
		}
	}
}

func TestReapStaleCleansUpAfterDeadProcesses(t *testing.T) {
	base := t.TempDir()
	mkdir := func(name string) string {
		dir := filepath.Join(base, name)
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	deadDir, liveDir, oldDir, newDir := mkdir("cluster-dead"), mkdir("cluster-live"), mkdir("cluster-old"), mkdir("cluster-new")
	old := time.Now().Add(-2 * failedLogsMaxAge)
	if err := os.Chtimes(oldDir, old, old); err != nil {
		t.Fatal(err)
	}

	// A leftover like etcd: a process whose command line names the dead run's directory.
	leftover := exec.Command("/bin/sh", "-c", "while :; do sleep 0.2; done", filepath.Join(deadDir, "etcd"))
	if err := leftover.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- leftover.Wait() }()
	t.Cleanup(func() { _ = leftover.Process.Kill() })

	// The dead run's process: one that has exited (its start time cannot match a new one).
	gone := exec.Command("/bin/true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	deadState := filepath.Join(base, fmt.Sprintf("%d-cluster-dead.json", gone.Process.Pid))
	if err := writeState(deadState, stateFile{PID: gone.Process.Pid, StartTime: 1, Dirs: []string{deadDir}}); err != nil {
		t.Fatal(err)
	}
	self, err := processStartTime(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	liveState := filepath.Join(base, fmt.Sprintf("%d-cluster-live.json", os.Getpid()))
	if err := writeState(liveState, stateFile{PID: os.Getpid(), StartTime: self, Dirs: []string{liveDir}}); err != nil {
		t.Fatal(err)
	}

	reapStale(base, nil)

	select {
	case <-exited:
	case <-time.After(30 * time.Second):
		t.Fatal("the leftover process of the dead run was not killed")
	}
	for _, gone := range []string{deadDir, deadState, oldDir} {
		if _, err := os.Stat(gone); !os.IsNotExist(err) {
			t.Errorf("%s should have been removed (stat: %v)", gone, err)
		}
	}
	for _, kept := range []string{liveDir, liveState, newDir} {
		if _, err := os.Stat(kept); err != nil {
			t.Errorf("%s should have been kept: %v", kept, err)
		}
	}
}
