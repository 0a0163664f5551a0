package sdk

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
)

// netnsEnv marks a process that already runs in the suite's own network namespace.
const netnsEnv = "SANDGATE_SDK_NETNS"

// InOwnNetworkNamespace re-runs the calling test binary in a network namespace of its own
// and returns its exit code, unless this process already is that run (then it returns
// false and the caller goes on). In the namespace there is only loopback: a default route on
// lo (kube-apiserver will not start without one, nor on a loopback-only address, hence
// 10.254.254.254/32 on lo) and every resolver of /etc/resolv.conf unreachable, so that the
// router's DNS fallback fails at once and nothing any component tries can leave the machine.
// It needs root (CAP_SYS_ADMIN) and iproute2's ip, as CI has.
func InOwnNetworkNamespace() (code int, reexeced bool) {
	if os.Getenv(netnsEnv) == "1" {
		return 0, false
	}
	script := []string{"set -e", "ip link set lo up", "ip addr add 10.254.254.254/32 dev lo", "ip route add default dev lo"}
	for _, ns := range resolvers() {
		script = append(script, "ip route add unreachable "+ns+"/32")
	}
	script = append(script, `exec "$@"`)
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintf(os.Stderr, "finding the test binary: %v\n", err)
		return 1, true
	}
	args := append([]string{"--net", "--", "sh", "-c", strings.Join(script, "; "), "sh", self}, os.Args[1:]...)
	cmd := exec.Command("unshare", args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), netnsEnv+"=1")
	if err := cmd.Run(); err != nil {
		if exit, ok := err.(*exec.ExitError); ok {
			return exit.ExitCode(), true
		}
		fmt.Fprintf(os.Stderr, "running the suite in a network namespace of its own (needs root, unshare and ip): %v\n", err)
		return 1, true
	}
	return 0, true
}

// resolvers are the IPv4 name servers of /etc/resolv.conf that are not loopback.
func resolvers() []string {
	f, err := os.Open("/etc/resolv.conf")
	if err != nil {
		return nil
	}
	defer func() { _ = f.Close() }()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == "nameserver" {
			if ip := net.ParseIP(fields[1]); ip != nil && ip.To4() != nil && !ip.IsLoopback() {
				out = append(out, ip.String())
			}
		}
	}
	return out
}
