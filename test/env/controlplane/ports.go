package controlplane

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// Ports reserve TCP ports on 127.0.0.1 for a child process (the operator, a replica of it,
// the public router, a webhook server) to listen on later.
//
// Asking the kernel for port 0 and closing the listener races: until the child binds, the
// port is free for anyone, and on a busy machine it is soon taken, either by the kernel as the
// source port of an outgoing connection (a client of the API server) or by another test
// process that asked the kernel too. Both happened in CI ("bind: address already in use").
// So a reserved port is
//   - below the kernel's ephemeral range, where no connection gets a source port, and
//   - held under an flock on a file in a directory shared by every process on the machine,
//     from reservation until the reserving process exits; the kernel drops the lock then, so a
//     crashed test leaks nothing.
//
// envtest's API server and etcd get their ports from the ephemeral range, so they never
// collide with these either.

// portsDir holds one lock file per reserved port, shared by every process on the machine.
var portsDir = filepath.Join(os.TempDir(), "sandgate-ports")

// Default bounds of the reserved range: above the well-known and registered ports most
// local services use, below Linux's default ephemeral range (32768-60999).
const (
	portsLow  = 20000
	portsHigh = 32768
)

// portsStart picks where in the range a search begins; random, so that processes seldom
// contend for the same lock files. Tests fix it to make them contend.
var portsStart = defaultPortsStart

func defaultPortsStart(span int) int { return rand.IntN(span) }

var ports struct {
	sync.Mutex
	held map[int]*os.File // the lock files this process holds, by port
}

// ReservePorts returns n distinct ports on 127.0.0.1 that were free when reserved and that no
// other process using ReservePorts gets until this one exits. Nothing listens on them: the
// caller passes them to the process that will.
func ReservePorts(n int) ([]int, error) {
	low, high := portRange()
	ports.Lock()
	defer ports.Unlock()
	if ports.held == nil {
		ports.held = map[int]*os.File{}
	}
	if err := os.MkdirAll(portsDir, 0o777); err != nil {
		return nil, fmt.Errorf("reserving ports: %w", err)
	}
	span := high - low
	start := portsStart(span)
	var got []int
	for i := 0; i < span && len(got) < n; i++ {
		port := low + (start+i)%span
		if _, mine := ports.held[port]; mine {
			continue
		}
		f, err := lockPort(port)
		if err != nil {
			return nil, err
		}
		if f == nil {
			continue // another process holds it, or something else listens on it
		}
		ports.held[port] = f
		got = append(got, port)
	}
	if len(got) < n {
		return nil, fmt.Errorf("reserving ports: only %d of %d free in %d-%d", len(got), n, low, high-1)
	}
	return got, nil
}

// ReservePort is ReservePorts(1).
func ReservePort() (int, error) {
	p, err := ReservePorts(1)
	if err != nil {
		return 0, err
	}
	return p[0], nil
}

// lockPort takes port's lock file and checks that nothing listens on the port. It returns
// the open, locked file, or nil when the port is not to be had.
func lockPort(port int) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(portsDir, strconv.Itoa(port)), os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		return nil, fmt.Errorf("reserving port %d: %w", port, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, nil
		}
		return nil, fmt.Errorf("reserving port %d: %w", port, err)
	}
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		_ = f.Close() // closing drops the lock
		return nil, nil
	}
	_ = l.Close() // only the check was wanted
	return f, nil
}

// portRange is [low, high) of the ports ReservePorts hands out: the default bounds, cut to
// end where this machine's ephemeral range begins.
func portRange() (low, high int) {
	low, high = portsLow, portsHigh
	data, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return low, high
	}
	f := strings.Fields(string(data))
	if len(f) != 2 {
		return low, high
	}
	ephemeral, err := strconv.Atoi(f[0])
	if err != nil || ephemeral >= high {
		return low, high
	}
	if ephemeral-1024 < 1000 {
		return low, high // an ephemeral range that takes nearly everything: nothing better
	}
	high = ephemeral
	if low >= high-1000 {
		low = 1024
	}
	return low, high
}
