package controlplane

import "fmt"

// EgressSelectorConfig is a kube-apiserver --egress-selector-config-file (set it with
// Options.APIServerFlags) that sends the "cluster" egress — every call the API server makes to a
// Service, such as a webhook's clientConfig.service — over HTTP CONNECT to the Unix socket
// socket, whose proxy the caller owns. The local control plane has no cluster network: without
// such a proxy the API server would dial a Service's ClusterIP on the machine's network.
func EgressSelectorConfig(socket string) string {
	return fmt.Sprintf(`apiVersion: apiserver.k8s.io/v1beta1
kind: EgressSelectorConfiguration
egressSelections:
- name: cluster
  connection:
    proxyProtocol: HTTPConnect
    transport:
      uds:
        udsName: %s
`, socket)
}
