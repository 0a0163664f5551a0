package controlplane

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// childStopTimeout is how long a component gets to exit after SIGTERM before it is killed.
const childStopTimeout = 10 * time.Second

// child is a control-plane component the cluster runs itself (kwok, kube-scheduler,
// kube-controller-manager), with its output in a log file.
type child struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	done    chan struct{} // closed when the process has exited
	err     error         // Wait's result, valid once done is closed
}

// startChild starts binary with args, its stdout and stderr going to logPath. The child gets
// its own process group (a terminal's Ctrl-C reaches this process, which stops it in order)
// and is killed by the kernel when the thread that started it dies (Pdeathsig).
func startChild(name, binary string, args []string, logPath string) (*child, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open log of %s: %w", name, err)
	}
	defer logFile.Close() // the child holds its own descriptor
	cmd := exec.Command(binary, args...)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := OnSpawnerThread(cmd.Start); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	c := &child{name: name, cmd: cmd, logPath: logPath, done: make(chan struct{})}
	go func() {
		c.err = cmd.Wait()
		close(c.done)
	}()
	return c, nil
}

// The kernel sends Pdeathsig when the thread that forked the child exits, not the process:
// children are forked from one OS thread that lives as long as the process, so that the Go
// runtime retiring a thread never kills them.
var (
	spawnOnce sync.Once
	spawnCh   chan func()
)

// OnSpawnerThread runs start (an exec.Cmd's Start) on the spawner thread and returns its
// error: a child started so, with Pdeathsig set, dies with this process and never before.
// The bench harness starts the operator through it too.
func OnSpawnerThread(start func() error) error {
	spawnOnce.Do(func() {
		spawnCh = make(chan func())
		go func() {
			runtime.LockOSThread() // never unlocked: the thread stays for the process's life
			for f := range spawnCh {
				f()
			}
		}()
	})
	errCh := make(chan error, 1)
	spawnCh <- func() { errCh <- start() }
	return <-errCh
}

// pid returns the child's process id.
func (c *child) pid() int { return c.cmd.Process.Pid }

// exited reports whether the child has exited, and how.
func (c *child) exited() (bool, error) {
	select {
	case <-c.done:
		return true, c.err
	default:
		return false, nil
	}
}

// signal sends sig to the child unless it has exited already.
func (c *child) signal(sig syscall.Signal) {
	if done, _ := c.exited(); !done {
		_ = c.cmd.Process.Signal(sig)
	}
}

// wait waits up to timeout for the child to exit after it was signalled, then kills it.
func (c *child) wait(timeout time.Duration) error {
	select {
	case <-c.done:
		return nil
	case <-time.After(timeout):
	}
	_ = c.cmd.Process.Kill()
	select {
	case <-c.done:
		return fmt.Errorf("stop %s: did not exit within %s of SIGTERM, killed it", c.name, timeout)
	case <-time.After(5 * time.Second):
		return fmt.Errorf("stop %s: process %d does not exit even after SIGKILL", c.name, c.pid())
	}
}

// failure describes a child that exited, with the end of its log.
func (c *child) failure() error {
	_, err := c.exited()
	return fmt.Errorf("%s exited unexpectedly (%v); end of %s:\n%s", c.name, err, c.logPath, tail(c.logPath, 20))
}

// tail returns the last n lines of the file at path, indented, or a note why it cannot.
func tail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return "    (" + err.Error() + ")"
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return "    " + strings.Join(lines, "\n    ")
}

// processesMentioning returns the ids of processes (other than this one) whose command
// line contains one of dirs. This finds envtest's etcd and kube-apiserver, which run with
// --data-dir and --cert-dir inside the cluster's directory.
func processesMentioning(dirs []string) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	self := os.Getpid()
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || len(cmdline) == 0 {
			continue
		}
		for _, dir := range dirs {
			if dir != "" && mentionsDir(cmdline, dir) {
				pids = append(pids, pid)
				break
			}
		}
	}
	return pids
}

// mentionsDir reports whether a NUL-separated command line refers to dir or a path in it.
func mentionsDir(cmdline []byte, dir string) bool {
	dir = filepath.Clean(dir)
	for rest := cmdline; len(rest) > 0; {
		i := bytes.Index(rest, []byte(dir))
		if i < 0 {
			return false
		}
		end := i + len(dir)
		if end == len(rest) || rest[end] == '/' || rest[end] == 0 {
			return true
		}
		rest = rest[end:]
	}
	return false
}

// processStartTime returns the start time of process pid in clock ticks since boot (field
// 22 of /proc/<pid>/stat); with the pid it identifies a process across pid reuse.
func processStartTime(pid int) (uint64, error) {
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) is in parentheses and may hold spaces: count after it.
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return 0, errors.New("malformed /proc stat")
	}
	fields := strings.Fields(string(data[i+1:]))
	if len(fields) < 20 {
		return 0, errors.New("malformed /proc stat")
	}
	return strconv.ParseUint(fields[19], 10, 64) // field 22 overall
}

// processAlive reports whether the process pid that started at startTime still runs.
func processAlive(pid int, startTime uint64) bool {
	if pid <= 0 {
		return false
	}
	if err := syscall.Kill(pid, 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	got, err := processStartTime(pid)
	if err != nil {
		return false
	}
	return startTime == 0 || got == startTime
}

// watchdogScript runs next to the process that started the cluster: once that process is
// gone (killed without a chance to clean up), it kills the processes it was given that still mention the
// cluster directory ($1) on their command line, then removes that directory, the state file
// ($2) and envtest's webhook certificate directory ($3, may be empty). $0 is that process's
// pid; the rest are the pids to kill.
const watchdogScript = `parent=$0 dir=$1 state=$2 certs=$3; shift 3
while kill -0 "$parent" 2>/dev/null; do sleep 1; done
for p in "$@"; do
  if grep -qaF -- "$dir" "/proc/$p/cmdline" 2>/dev/null; then kill -KILL "$p" 2>/dev/null; fi
done
rm -rf -- "$dir" "$state" ${certs:+"$certs"}
`

// startWatchdog starts the watchdog shell for the processes pids. It is not a child that
// dies with this process: that is its point. Stop kills it first.
func startWatchdog(dir, stateFile, certDir string, pids []int) (*exec.Cmd, error) {
	args := []string{"-c", watchdogScript, strconv.Itoa(os.Getpid()), dir, stateFile, certDir}
	for _, pid := range pids {
		args = append(args, strconv.Itoa(pid))
	}
	cmd := exec.Command("/bin/sh", args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start watchdog: %w", err)
	}
	go func() { _ = cmd.Wait() }()
	return cmd, nil
}
