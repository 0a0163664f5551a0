// Package proc reads what a process has cost so far from Linux's /proc: CPU seconds (user +
// system, the process and its live descendants) and peak resident memory (VmHWM). The load
// generator runs the operator as a child and reads these before and after a run.
package proc

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// userHZ is the unit of utime and stime in /proc/<pid>/stat. Linux has fixed it at 100 for
// user space on every architecture it runs on (USER_HZ), whatever the kernel's HZ.
const userHZ = 100

// Usage is the cost of a process tree at one moment.
type Usage struct {
	// CPUSeconds is user plus system time of the process and of its descendants still running.
	CPUSeconds float64
	// PeakRSSBytes is the largest VmHWM (peak resident set size) among those processes.
	PeakRSSBytes int64
}

// statInfo is what one /proc/<pid>/stat line holds that matters here.
type statInfo struct {
	ppid       int
	cpuSeconds float64
}

// parseStat parses the content of /proc/<pid>/stat. The command name, field 2, is in
// parentheses and may itself contain spaces and parentheses, so the fields are counted from
// the last ')'.
func parseStat(data []byte) (statInfo, error) {
	end := bytes.LastIndexByte(data, ')')
	if end < 0 {
		return statInfo{}, errors.New("parsing stat: no command name")
	}
	// After ") " come field 3 (state), 4 (ppid), ... 14 (utime), 15 (stime).
	fields := strings.Fields(string(data[end+1:]))
	if len(fields) < 13 {
		return statInfo{}, fmt.Errorf("parsing stat: %d fields after the command name, want at least 13", len(fields))
	}
	ppid, err := strconv.Atoi(fields[1])
	if err != nil {
		return statInfo{}, fmt.Errorf("parsing stat ppid: %w", err)
	}
	utime, err := strconv.ParseUint(fields[11], 10, 64)
	if err != nil {
		return statInfo{}, fmt.Errorf("parsing stat utime: %w", err)
	}
	stime, err := strconv.ParseUint(fields[12], 10, 64)
	if err != nil {
		return statInfo{}, fmt.Errorf("parsing stat stime: %w", err)
	}
	return statInfo{ppid: ppid, cpuSeconds: float64(utime+stime) / userHZ}, nil
}

// parseHWM returns VmHWM in bytes from the content of /proc/<pid>/status; 0 when absent
// (kernel threads, zombies).
func parseHWM(data []byte) (int64, error) {
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "VmHWM:")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			return 0, fmt.Errorf("parsing VmHWM %q: want \"<n> kB\"", rest)
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("parsing VmHWM: %w", err)
		}
		return kb * 1024, nil
	}
	return 0, sc.Err()
}

// Read returns the usage of pid and its live descendants, from root (normally "/proc").
func Read(root string, pid int) (Usage, error) {
	stats, err := allStats(root)
	if err != nil {
		return Usage{}, err
	}
	if _, ok := stats[pid]; !ok {
		return Usage{}, fmt.Errorf("reading process %d: not running", pid)
	}
	var u Usage
	for _, p := range tree(stats, pid) {
		u.CPUSeconds += stats[p].cpuSeconds
		data, err := os.ReadFile(filepath.Join(root, strconv.Itoa(p), "status"))
		if err != nil {
			continue // exited meanwhile
		}
		if hwm, err := parseHWM(data); err == nil && hwm > u.PeakRSSBytes {
			u.PeakRSSBytes = hwm
		}
	}
	return u, nil
}

// CPUSeconds returns the user plus system time of pid alone (not its descendants) from root:
// one small read, cheap enough to take at every event of a run, where Read lists every process.
func CPUSeconds(root string, pid int) (float64, error) {
	data, err := os.ReadFile(filepath.Join(root, strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0, fmt.Errorf("reading process %d: %w", pid, err)
	}
	st, err := parseStat(data)
	if err != nil {
		return 0, fmt.Errorf("reading process %d: %w", pid, err)
	}
	return st.cpuSeconds, nil
}

// allStats reads the stat of every process under root; processes that exit meanwhile are
// skipped.
func allStats(root string) (map[int]statInfo, error) {
	entries, err := os.ReadDir(root)
	if err != nil {
		return nil, fmt.Errorf("listing processes: %w", err)
	}
	out := map[int]statInfo{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile(filepath.Join(root, e.Name(), "stat"))
		if err != nil {
			continue
		}
		if st, err := parseStat(data); err == nil {
			out[pid] = st
		}
	}
	return out, nil
}

// tree returns pid and its descendants.
func tree(stats map[int]statInfo, pid int) []int {
	children := map[int][]int{}
	for p, st := range stats {
		children[st.ppid] = append(children[st.ppid], p)
	}
	out := []int{pid}
	for i := 0; i < len(out); i++ {
		out = append(out, children[out[i]]...)
	}
	return out
}
