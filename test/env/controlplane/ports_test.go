package controlplane

import (
	"bufio"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// childEnv makes the test binary a second process that reserves ports, prints them and
// holds them until its stdin closes. It is checked in init, before any TestMain (the
// integration build's starts a cluster).
const childEnv = "SANDGATE_PORTS_TEST_CHILD"

func init() {
	if n, err := strconv.Atoi(os.Getenv(childEnv)); err == nil {
		portsStart = func(int) int { return 0 }
		got, err := ReservePorts(n)
		if err != nil {
			os.Stderr.WriteString(err.Error() + "\n")
			os.Exit(2)
		}
		for _, p := range got {
			os.Stdout.WriteString(strconv.Itoa(p) + "\n")
		}
		_, _ = bufio.NewReader(os.Stdin).ReadString('\n') // hold until the parent lets go
		os.Exit(0)
	}
}

// TestReservedPortsAreNotHandedToAnotherProcess: two processes that search the range from
// the same place get disjoint ports while both live, and the ports come free when the
// holder exits.
func TestReservedPortsAreNotHandedToAnotherProcess(t *testing.T) {
	portsStart = func(int) int { return 0 }
	t.Cleanup(func() { portsStart = defaultPortsStart })

	child := exec.Command(os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), childEnv+"=3")
	stdin, err := child.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	child.Stderr = os.Stderr
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	var theirs []int
	sc := bufio.NewScanner(stdout)
	for len(theirs) < 3 && sc.Scan() {
		p, err := strconv.Atoi(strings.TrimSpace(sc.Text()))
		if err != nil {
			t.Fatalf("child printed %q", sc.Text())
		}
		theirs = append(theirs, p)
	}
	if len(theirs) != 3 {
		_ = child.Process.Kill()
		t.Fatalf("child reserved %v, want 3 ports", theirs)
	}

	mine, err := ReservePorts(3)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range mine {
		if slices.Contains(theirs, p) {
			t.Errorf("port %d handed to both processes (mine %v, the child's %v)", p, mine, theirs)
		}
	}

	_ = stdin.Close()
	if err := child.Wait(); err != nil {
		t.Fatalf("child: %v", err)
	}
	// The child has exited: its locks are gone, and the search from the start finds its ports.
	after, err := ReservePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(theirs, after[0]) {
		t.Errorf("after the child exited, got port %d, want one of its ports %v back", after[0], theirs)
	}
}

// TestReservePortsSkipsPortsInUse: a port something already listens on is never reserved,
// and no reserved port lies in the kernel's ephemeral range.
func TestReservePortsSkipsPortsInUse(t *testing.T) {
	low, high := portRange()
	// Listen on the first port the search would take.
	var busy net.Listener
	for p := low; p < high && busy == nil; p++ {
		if l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p))); err == nil {
			busy = l
		}
	}
	if busy == nil {
		t.Fatalf("no free port in %d-%d", low, high-1)
	}
	defer busy.Close()
	busyPort := busy.Addr().(*net.TCPAddr).Port
	portsStart = func(int) int { return busyPort - low }
	t.Cleanup(func() { portsStart = defaultPortsStart })

	got, err := ReservePorts(5)
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(got, busyPort) {
		t.Errorf("reserved port %d, which a listener holds", busyPort)
	}
	if data, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(data)); len(f) == 2 {
			ephemeral, _ := strconv.Atoi(f[0])
			for _, p := range got {
				if p >= ephemeral {
					t.Errorf("reserved port %d lies in the ephemeral range, which starts at %d", p, ephemeral)
				}
			}
		}
	}
}
