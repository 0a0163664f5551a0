package webhooks

import (
	"context"
	"slices"

	authenticationv1 "k8s.io/api/authentication/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
)

// DefaultPlatformGroups are the groups trusted to act on every claim and Sandbox
// (--platform-groups): cluster administrators.
var DefaultPlatformGroups = []string{"system:masters"}

// kubeSystemControllers are the identities of the Kubernetes controllers that delete on
// everyone's behalf (the garbage collector, the namespace controller): with service account
// credentials, their group; without, kube-controller-manager's own user.
const (
	kubeSystemServiceAccounts = "system:serviceaccounts:kube-system"
	kubeControllerManagerUser = "system:kube-controller-manager"
)

// Authority decides who may act on objects that belong to someone: RBAC says who may write a
// kind in a namespace, not whose claim it is. A claim belongs to the identity that created it
// (agentsv1beta1.AnnotationCreator, recorded at admission); its Sandbox belongs to the same
// identity. The operator, the platform groups and the Kubernetes controllers that delete for
// everyone may act on any of them.
type Authority struct {
	// OperatorUser is the operator's user name.
	OperatorUser string
	// PlatformGroups are the groups whose members act as the platform; nil means
	// DefaultPlatformGroups.
	PlatformGroups []string
}

// withOperator is a with user as its operator when it names none.
func (a Authority) withOperator(user string) Authority {
	if a.OperatorUser == "" {
		a.OperatorUser = user
	}
	return a
}

// operator reports whether the request comes from the operator.
func (a Authority) operator(u authenticationv1.UserInfo) bool {
	return a.OperatorUser != "" && u.Username == a.OperatorUser
}

// trusted reports whether u may act on every claim and Sandbox: the operator, a platform
// group's member, or a Kubernetes controller.
func (a Authority) trusted(u authenticationv1.UserInfo) bool {
	groups := a.PlatformGroups
	if groups == nil {
		groups = DefaultPlatformGroups
	}
	return a.operator(u) || u.Username == kubeControllerManagerUser ||
		slices.ContainsFunc(u.Groups, func(g string) bool { return g == kubeSystemServiceAccounts || slices.Contains(groups, g) })
}

// mayActFor reports whether u may change or delete what belongs to creator: creator itself,
// or a trusted identity. An object created before admission recorded creators ("") is left
// to RBAC.
func (a Authority) mayActFor(u authenticationv1.UserInfo, creator string) bool {
	return creator == "" || u.Username == creator || a.trusted(u)
}

// userInfo is the requester of the admission request in ctx (empty when there is none).
func userInfo(ctx context.Context) authenticationv1.UserInfo {
	req, err := admission.RequestFromContext(ctx)
	if err != nil {
		return authenticationv1.UserInfo{}
	}
	return req.UserInfo
}

// creatorOf is the identity recorded as an object's creator.
func creatorOf(annotations map[string]string) string {
	return annotations[agentsv1beta1.AnnotationCreator]
}

// isOperator reports whether the admission request in ctx comes from the operator.
func isOperator(ctx context.Context, operatorUser string) bool {
	req, err := admission.RequestFromContext(ctx)
	return err == nil && operatorUser != "" && req.UserInfo.Username == operatorUser
}
