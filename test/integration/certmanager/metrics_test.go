//go:build integration

package certmanager_test

import (
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// scraped is the answer to a scrape of the metrics endpoint.
type scraped struct {
	Status int
	Body   string
}

// scrape gets url with token as bearer token ("" for none). The endpoint's certificate is one
// the manager made in memory: the scrape checks who may read, not who serves.
func scrape(t *testing.T, url, token string) scraped {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	c := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, // the certificate is self-signed in memory
	}}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("scraping %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return scraped{Status: resp.StatusCode, Body: string(body)}
}

// metricsReaderRole returns the name of the install's ClusterRole granting get on /metrics.
func metricsReaderRole(t *testing.T, ctx context.Context, c client.Client) string {
	t.Helper()
	var roles rbacv1.ClusterRoleList
	if err := c.List(ctx, &roles); err != nil {
		t.Fatal(err)
	}
	for _, r := range roles.Items {
		if strings.HasPrefix(r.Name, "sandgate-") && len(r.Rules) == 1 && len(r.Rules[0].NonResourceURLs) == 1 &&
			r.Rules[0].NonResourceURLs[0] == "/metrics" {
			return r.Name
		}
	}
	t.Fatal("the install has no ClusterRole granting get on /metrics")
	return ""
}

// serviceAccountToken creates service account ns/name, binds it to ClusterRole role unless
// role is "", and returns a token of it as a pod would have mounted.
func serviceAccountToken(t *testing.T, ctx context.Context, cs kubernetes.Interface, c client.Client, ns, name, role string) string {
	t.Helper()
	if err := c.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}); err != nil {
		t.Fatal(err)
	}
	if role != "" {
		if err := c.Create(ctx, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: ns + "-" + name + "-" + role},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: name}},
		}); err != nil {
			t.Fatal(err)
		}
	}
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](600)},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("requesting a token of %s/%s: %v", ns, name, err)
	}
	return tr.Status.Token
}
