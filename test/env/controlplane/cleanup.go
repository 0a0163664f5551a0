package controlplane

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// stateFile records what a running cluster left on the machine, so that a later Start can
// clean up after a process that was killed before it could (see reapStale).
type stateFile struct {
	PID       int         `json:"pid"`
	StartTime uint64      `json:"startTime"` // of PID, in clock ticks since boot
	Dirs      []string    `json:"dirs"`
	Children  []childInfo `json:"children,omitempty"`
}

// childInfo names one process the cluster started.
type childInfo struct {
	Name string `json:"name"`
	PID  int    `json:"pid"`
}

// failedLogsMaxAge is how long the logs of a cluster that failed to start stay around.
const failedLogsMaxAge = 24 * time.Hour

// baseDir is where clusters keep their directories and state files:
// $TMPDIR/sandgate-framework. The name predates this package (it was test/framework); it is
// kept so that a Start reaps what processes built from older trees left behind.
func baseDir() string {
	return filepath.Join(os.TempDir(), "sandgate-framework")
}

// writeState writes st to path atomically.
func writeState(path string, st stateFile) error {
	data, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return fmt.Errorf("encode state file: %w", err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return fmt.Errorf("write state file: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write state file: %w", err)
	}
	return nil
}

// reapStale cleans up after processes that died without stopping their clusters:
// for every state file in base whose process is gone it kills the processes whose command
// line mentions one of the recorded directories (envtest's etcd and kube-apiserver cannot
// be tied to their parent's life), then removes the directories and the state file. It
// also removes cluster directories no state file refers to (logs kept after a failed start)
// once they are older than failedLogsMaxAge.
func reapStale(base string, log io.Writer) {
	entries, err := os.ReadDir(base)
	if err != nil {
		return
	}
	referenced := map[string]bool{}
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".json") {
			continue
		}
		path := filepath.Join(base, name)
		data, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		var st stateFile
		if err := json.Unmarshal(data, &st); err != nil || st.PID == 0 {
			// Unreadable: written by nothing we know. Name it after its pid to judge it.
			pid, _ := strconv.Atoi(strings.SplitN(name, "-", 2)[0])
			if pid > 0 && processAlive(pid, 0) {
				continue
			}
			_ = os.Remove(path)
			continue
		}
		if processAlive(st.PID, st.StartTime) {
			for _, d := range st.Dirs {
				referenced[filepath.Clean(d)] = true
			}
			continue
		}
		killed := 0
		for _, pid := range processesMentioning(st.Dirs) {
			if syscall.Kill(pid, syscall.SIGKILL) == nil {
				killed++
			}
		}
		for _, d := range st.Dirs {
			_ = os.RemoveAll(d)
		}
		_ = os.Remove(path)
		if log != nil {
			fmt.Fprintf(log, "controlplane: cleaned up after dead process %d: killed %d leftover processes, removed %s\n",
				st.PID, killed, strings.Join(st.Dirs, ", "))
		}
	}
	for _, e := range entries {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), "cluster-") {
			continue
		}
		dir := filepath.Join(base, e.Name())
		if referenced[dir] {
			continue
		}
		if info, err := e.Info(); err == nil && time.Since(info.ModTime()) > failedLogsMaxAge {
			_ = os.RemoveAll(dir)
		}
	}
}

// Signal handling: one handler for all clusters of the process.
var (
	liveMu         sync.Mutex
	liveClusters   = map[*Cluster]struct{}{}
	signalsWatched bool
)

// registerForSignals makes SIGINT and SIGTERM stop c before the process goes down.
func registerForSignals(c *Cluster) {
	liveMu.Lock()
	defer liveMu.Unlock()
	liveClusters[c] = struct{}{}
	if !signalsWatched {
		signalsWatched = true
		ch := make(chan os.Signal, 1)
		signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM)
		go handleSignal(ch)
	}
}

// unregisterForSignals forgets c, which is stopping.
func unregisterForSignals(c *Cluster) {
	liveMu.Lock()
	delete(liveClusters, c)
	liveMu.Unlock()
}

// handleSignal stops every live cluster on the first signal, then delivers the signal
// again: with this handler gone the default action ends the process with the signal's
// status, unless other code of the process handles it too.
func handleSignal(ch chan os.Signal) {
	sig := <-ch
	liveMu.Lock()
	clusters := make([]*Cluster, 0, len(liveClusters))
	for c := range liveClusters {
		clusters = append(clusters, c)
	}
	liveMu.Unlock()
	var wg sync.WaitGroup
	for _, c := range clusters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if c.log != nil {
				fmt.Fprintf(c.log, "controlplane: %v received, stopping the cluster in %s\n", sig, c.Dir)
			}
			_ = c.Stop()
		}()
	}
	wg.Wait()
	liveMu.Lock()
	signal.Stop(ch)
	signalsWatched = false
	liveMu.Unlock()
	if s, ok := sig.(syscall.Signal); ok {
		_ = syscall.Kill(os.Getpid(), s)
	}
}

// removeAllBut removes everything in dir except the entry named keep.
func removeAllBut(dir, keep string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return err
	}
	var errs []error
	for _, e := range entries {
		if e.Name() != keep {
			errs = append(errs, os.RemoveAll(filepath.Join(dir, e.Name())))
		}
	}
	return errors.Join(errs...)
}
