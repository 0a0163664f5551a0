package framework

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
	"github.com/sandgate-dev/sandgate/test/env/controlplane"
)

// The shipped ClusterRoles of the people who use sandboxes (config/rbac), by file.
const (
	// EditorRole is the compatibility role: tenant and platform at once.
	EditorRole = "sandbox_editor_role.yaml"
	// TenantRole is a tenant's: claims only, Sandboxes read-only.
	TenantRole = "sandbox_tenant_role.yaml"
	// PlatformRole is the platform team's: templates, pools, claims and Sandboxes.
	PlatformRole = "sandbox_platform_role.yaml"
)

// Tenant returns a client acting as user name, whose only permissions are the shipped
// sandbox-editor-role in namespace ns: a platform's tenant, the identity attack tests use.
// admin creates the role (from config/rbac, as installed) and the RoleBinding.
func (c *Cluster) Tenant(t testing.TB, admin client.Client, ns, name string) client.Client {
	t.Helper()
	return c.UserWithRole(t, admin, ns, name, EditorRole)
}

// UserWithRole returns a client acting as user name, whose only permissions are the shipped
// ClusterRole of config/rbac/<roleFile> (EditorRole, TenantRole, PlatformRole) in namespace
// ns. admin creates the role, as installed, and the RoleBinding.
func (c *Cluster) UserWithRole(t testing.TB, admin client.Client, ns, name, roleFile string) client.Client {
	t.Helper()
	ctx := context.Background()
	root, err := controlplane.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(root, "config", "rbac", roleFile))
	if err != nil {
		t.Fatal(err)
	}
	role := &rbacv1.ClusterRole{}
	if err := yaml.Unmarshal(raw, role); err != nil {
		t.Fatalf("decoding %s: %v", roleFile, err)
	}
	if err := admin.Create(ctx, role); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("creating %s: %v", role.Name, err)
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-" + role.Name, Namespace: ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: name}},
	}
	if err := admin.Create(ctx, binding); err != nil {
		t.Fatalf("binding %s: %v", role.Name, err)
	}
	tenant, err := c.ClientAs(name, "system:authenticated")
	if err != nil {
		t.Fatal(err)
	}
	// The binding is in force once the tenant can list Sandboxes; and it is no more than an
	// editor: Secrets stay out of reach.
	err = wait.PollUntilContextTimeout(ctx, Interval, Timeout, true, func(ctx context.Context) (bool, error) {
		return tenant.List(ctx, &agentsv1beta1.SandboxList{}, client.InNamespace(ns)) == nil, nil
	})
	if err != nil {
		t.Fatalf("user %s never got %s: %v", name, role.Name, err)
	}
	if err := tenant.List(ctx, &corev1.SecretList{}, client.InNamespace(ns)); !apierrors.IsForbidden(err) {
		t.Fatalf("user %s can list Secrets (%v): more than %s", name, err, role.Name)
	}
	return tenant
}

// AllowPods lets user create pods in namespace ns (a Role and RoleBinding made by admin), as a
// platform may grant a tenant: a user creates a Sandbox only if they may create its pod.
func (c *Cluster) AllowPods(t testing.TB, admin client.Client, ns, user string) {
	t.Helper()
	ctx := context.Background()
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "pods-" + user, Namespace: ns}, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{""}, Resources: []string{"pods", "persistentvolumeclaims"}, Verbs: []string{"create", "get", "list", "watch", "delete"}}}}
	if err := admin.Create(ctx, role); err != nil {
		t.Fatalf("creating the pod role of %s: %v", user, err)
	}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "pods-" + user, Namespace: ns},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}}}
	if err := admin.Create(ctx, binding); err != nil {
		t.Fatalf("binding the pod role of %s: %v", user, err)
	}
}
