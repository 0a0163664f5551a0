package check

import (
	"cmp"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
)

// Check proves, after the fact, that no invariant broke during a soak; see the Invariant*
// names for what it proves and the package documentation for how.
func Check(in Input) Report {
	c := newChecker(in)
	c.index()
	c.checkClaimStamps()
	c.checkBindings()
	c.checkLeader()
	c.checkFinal()
	c.checkPolicies()
	c.checkRecords()
	sortViolations(c.report.Violations)
	for _, v := range c.report.Violations {
		c.report.ByInvariant[v.Invariant]++
	}
	return c.report
}

// nsName is a namespaced name.
type nsName struct{ ns, name string }

func (n nsName) String() string { return n.ns + "/" + n.name }

// version is one state of an object, as a successful write left it.
type version[T any] struct {
	ev  *AuditEvent
	rv  uint64
	obj *T
}

// ending is the write after which an object no longer existed: a delete answered with a
// Status (rv 0: the Status carries no revision), or the write that left the object being
// deleted without finalizers.
type ending struct {
	ev *AuditEvent
	rv uint64
}

type checker struct {
	in        Input
	replicaOf func([]string) string
	report    Report

	sandboxes map[types.UID][]version[agentsv1beta1.Sandbox]
	claims    map[types.UID][]version[extv1beta1.SandboxClaim]
	gone      map[types.UID]ending
	// admitted are the claim creates answered 201, by the claim's name.
	admitted map[nsName]*AuditEvent
	// claimDeleted is when the first successful delete of each claim was received (a
	// delete names its object, unlike a create with generateName).
	claimDeleted map[nsName]time.Time
	// claimReady is when the API server first answered a write with the claim Ready.
	claimReady map[nsName]time.Time
	// missingObjects counts writes of Sandboxes and claims logged without their object.
	missingObjects int
}

func newChecker(in Input) *checker {
	replicaOf := in.ReplicaOf
	if replicaOf == nil {
		replicaOf = ReplicaFromGroups
	}
	return &checker{
		in:        in,
		replicaOf: replicaOf,
		report: Report{
			ByInvariant:  map[string]int{},
			Recovery:     map[string][]time.Duration{},
			FaultsByKind: map[string]int{},
		},
		sandboxes:    map[types.UID][]version[agentsv1beta1.Sandbox]{},
		claims:       map[types.UID][]version[extv1beta1.SandboxClaim]{},
		gone:         map[types.UID]ending{},
		admitted:     map[nsName]*AuditEvent{},
		claimDeleted: map[nsName]time.Time{},
		claimReady:   map[nsName]time.Time{},
	}
}

func (c *checker) violate(invariant, object string, at time.Time, format string, args ...any) {
	c.report.Violations = append(c.report.Violations, Violation{
		Invariant: invariant, Object: object, At: at, Detail: fmt.Sprintf(format, args...),
	})
}

func (c *checker) note(format string, args ...any) {
	c.report.Notes = append(c.report.Notes, fmt.Sprintf(format, args...))
}

const (
	groupAgents     = "agents.x-k8s.io"
	groupExtensions = "extensions.agents.x-k8s.io"
)

func isSandboxWrite(e *AuditEvent) bool {
	return e.APIGroup == groupAgents && e.Resource == "sandboxes"
}

func isClaimWrite(e *AuditEvent) bool {
	return e.APIGroup == groupExtensions && e.Resource == "sandboxclaims"
}

// index builds the successive versions of every Sandbox and claim from the audit log's
// successful writes, ordered by resourceVersion: etcd revisions, so the order in which the
// writes took effect, whatever order the log has them in.
func (c *checker) index() {
	for i := range c.in.Audit {
		e := &c.in.Audit[i]
		if e.Verb == "create" && e.Code == http.StatusTooManyRequests && isClaimWrite(e) {
			c.report.Claims.Shed++
		}
		if !e.Mutating() || !e.Succeeded() {
			continue
		}
		sandbox, claim := isSandboxWrite(e), isClaimWrite(e)
		if !sandbox && !claim {
			continue
		}
		if claim && e.Verb == "create" && e.Code == 201 && e.Name != "" {
			c.admitted[nsName{e.Namespace, e.Name}] = e
		}
		if claim && e.Verb == "delete" {
			key := nsName{e.Namespace, e.Name}
			if t, ok := c.claimDeleted[key]; !ok || e.Received.Before(t) {
				c.claimDeleted[key] = e.Received
			}
		}
		if e.Response == nil {
			c.missingObjects++
			continue
		}
		for _, obj := range responseObjects(e.Response) {
			switch {
			case obj.GetKind() == "Status":
				c.statusEnding(e, obj)
			case sandbox && obj.GetKind() == "Sandbox":
				if v, ok := decodeVersion[agentsv1beta1.Sandbox](c, e, obj); ok {
					c.sandboxes[v.obj.UID] = append(c.sandboxes[v.obj.UID], v)
					c.objectEnding(e, &v.obj.ObjectMeta, v.rv)
				}
			case claim && obj.GetKind() == "SandboxClaim":
				if v, ok := decodeVersion[extv1beta1.SandboxClaim](c, e, obj); ok {
					c.claims[v.obj.UID] = append(c.claims[v.obj.UID], v)
					c.objectEnding(e, &v.obj.ObjectMeta, v.rv)
					if e.Verb == "create" && e.Code == 201 {
						// A create with generateName names its claim in the response only.
						c.admitted[nsName{v.obj.Namespace, v.obj.Name}] = e
					}
				}
			}
		}
	}
	for uid := range c.sandboxes {
		c.sandboxes[uid] = sortVersions(c.sandboxes[uid])
	}
	for uid, vs := range c.claims {
		vs = sortVersions(vs)
		c.claims[uid] = vs
		for _, v := range vs {
			if isReady(v.obj.Status.Conditions) {
				c.claimReady[nsName{v.obj.Namespace, v.obj.Name}] = v.ev.Completed
				break
			}
		}
	}
	if c.missingObjects > 0 {
		c.note("%d successful writes of Sandboxes or claims were logged without their object: was the API server's audit policy check.AuditPolicy?", c.missingObjects)
	}
}

// responseObjects are the objects of a response: the items of a list (deletecollection),
// or the response itself.
func responseObjects(u *unstructured.Unstructured) []*unstructured.Unstructured {
	if !u.IsList() {
		return []*unstructured.Unstructured{u}
	}
	var out []*unstructured.Unstructured
	_ = u.EachListItem(func(o runtime.Object) error {
		if item, ok := o.(*unstructured.Unstructured); ok {
			out = append(out, item)
		}
		return nil
	})
	return out
}

// statusEnding records the deletion a Status response of a delete reports (its details carry
// the deleted object's UID).
func (c *checker) statusEnding(e *AuditEvent, status *unstructured.Unstructured) {
	if e.Verb != "delete" && e.Verb != "deletecollection" {
		return
	}
	uid, _, _ := unstructured.NestedString(status.Object, "details", "uid")
	if uid == "" {
		return
	}
	if _, seen := c.gone[types.UID(uid)]; !seen {
		c.gone[types.UID(uid)] = ending{ev: e}
	}
}

// objectEnding records the write that left an object being deleted with no finalizer left:
// the API server removed it with that write.
func (c *checker) objectEnding(e *AuditEvent, om *metav1.ObjectMeta, rv uint64) {
	if om.DeletionTimestamp == nil || len(om.Finalizers) > 0 || om.UID == "" {
		return
	}
	if g, seen := c.gone[om.UID]; !seen || (g.rv != 0 && rv < g.rv) {
		c.gone[om.UID] = ending{ev: e, rv: rv}
	}
}

func decodeVersion[T any](c *checker, e *AuditEvent, obj *unstructured.Unstructured) (version[T], bool) {
	var out T
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &out); err != nil {
		c.note("audit %s: decoding the %s %s/%s of a %s: %v", e.AuditID, obj.GetKind(), obj.GetNamespace(), obj.GetName(), e.Verb, err)
		return version[T]{}, false
	}
	rv, err := strconv.ParseUint(obj.GetResourceVersion(), 10, 64)
	if err != nil || obj.GetUID() == "" {
		c.note("audit %s: the %s %s/%s of a %s has resourceVersion %q and UID %q: left out", e.AuditID, obj.GetKind(),
			obj.GetNamespace(), obj.GetName(), e.Verb, obj.GetResourceVersion(), obj.GetUID())
		return version[T]{}, false
	}
	return version[T]{ev: e, rv: rv, obj: &out}, true
}

// sortVersions orders versions by resourceVersion and drops repeats of one (a patch that
// changed nothing answers with the version it found).
func sortVersions[T any](vs []version[T]) []version[T] {
	slices.SortStableFunc(vs, func(a, b version[T]) int {
		return cmp.Or(cmp.Compare(a.rv, b.rv), a.ev.Completed.Compare(b.ev.Completed))
	})
	return slices.CompactFunc(vs, func(a, b version[T]) bool { return a.rv == b.rv })
}

func isReady(conds []metav1.Condition) bool {
	return meta.IsStatusConditionTrue(conds, agentsv1beta1.ConditionReady)
}

// describe names a request in a violation's detail.
func describe(e *AuditEvent) string {
	obj := e.Resource
	if e.Subresource != "" {
		obj += "/" + e.Subresource
	}
	return fmt.Sprintf("%s %s by %s (audit %s, code %d)", e.Verb, obj, e.User, e.AuditID, e.Code)
}

func sandboxObject(ns, name string) string { return "Sandbox " + ns + "/" + name }
func claimObject(ns, name string) string   { return "SandboxClaim " + ns + "/" + name }
