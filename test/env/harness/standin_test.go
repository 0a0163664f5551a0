package harness

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"testing"
	"time"

	admissionapi "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/sandgate-dev/sandgate/certs"
	"github.com/sandgate-dev/sandgate/test/env/controlplane"
)

// TestMain lets the test binary be the stand-in's executable, as sandgate-bench is.
func TestMain(m *testing.M) {
	ServeStandInIfAsked()
	os.Exit(m.Run())
}

func TestStandInAnswersFromAProcessOfItsOwn(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := t.TempDir()
	bundle, err := certs.SelfSigned([]string{"localhost"}, []net.IP{net.IPv4(127, 0, 0, 1)}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if err := bundle.Write(dir); err != nil {
		t.Fatal(err)
	}
	ports, err := controlplane.ReservePorts(2)
	if err != nil {
		t.Fatal(err)
	}
	exe, err := StandInExecutable()
	if err != nil {
		t.Fatal(err)
	}
	e := &Env{dir: dir, v1beta1Only: true, standInExe: exe,
		webhook: endpoints{webhookHost: "127.0.0.1", webhookPort: ports[0], webhookCertDir: dir, metricsPort: ports[1]}}
	const path = "/mutate-extensions-agents-x-k8s-io-v1beta1-sandboxclaim"
	if err := e.startStandIn(ctx, []string{path}); err != nil {
		t.Fatal(err)
	}
	defer e.stopWebhooks()
	if e.standIn.PID == os.Getpid() {
		t.Fatal("the stand-in runs in the test's own process")
	}

	review := admissionapi.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionapi.AdmissionRequest{
			UID: "1", Operation: admissionapi.Create,
			Kind:   metav1.GroupVersionKind{Group: "extensions.agents.x-k8s.io", Version: "v1beta1", Kind: "SandboxClaim"},
			Object: runtime.RawExtension{Raw: []byte(`{"metadata":{"name":"c"}}`)},
		},
	}
	body, err := json.Marshal(review)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(bundle.CAPEM)
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	url := fmt.Sprintf("https://127.0.0.1:%d%s", ports[0], path)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	var got admissionapi.AdmissionReview
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
		t.Fatal(err)
	}
	if got.Response == nil || !got.Response.Allowed || len(got.Response.Patch) == 0 {
		t.Fatalf("response %+v, want the claim allowed with its webhook-first-observed-at stamp", got.Response)
	}

	snap, err := e.StandInMetrics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n := snap.Sum("controller_runtime_webhook_latency_seconds_count", map[string]string{"webhook": path}); n != 1 {
		t.Errorf("the stand-in's metrics count %v calls of %s, want 1", n, path)
	}
	if _, err := e.StandInUsage(); err != nil {
		t.Errorf("reading the stand-in's usage: %v", err)
	}
}
