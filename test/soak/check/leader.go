package check

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// holding is a stretch of time in which a replica held the leader election Lease: from the
// receipt of its write naming its identity holder, to the first of its last renewal's expiry
// (renewTime + leaseDurationSeconds), its release, and the completion of another identity's
// acquisition. Receipt and completion bound each request's effect from both sides; the
// holding takes the wider reading, so that a write racing a take-over by milliseconds is
// not counted against the replica.
type holding struct {
	replica, identity string
	start, end        time.Time
}

// leaseTimeline builds the holdings of the Lease from its successful writes, in
// resourceVersion order.
func (c *checker) leaseTimeline() []*holding {
	var vs []version[coordinationv1.Lease]
	for i := range c.in.Audit {
		e := &c.in.Audit[i]
		if !c.isLeaseWrite(e) || !e.Succeeded() || e.Verb == "delete" || e.Response == nil {
			continue
		}
		var lease coordinationv1.Lease
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(e.Response.Object, &lease); err != nil {
			c.note("audit %s: decoding the Lease of a %s: %v", e.AuditID, e.Verb, err)
			continue
		}
		rv, err := strconv.ParseUint(lease.ResourceVersion, 10, 64)
		if err != nil {
			c.note("audit %s: the Lease of a %s has resourceVersion %q: left out", e.AuditID, e.Verb, lease.ResourceVersion)
			continue
		}
		vs = append(vs, version[coordinationv1.Lease]{ev: e, rv: rv, obj: &lease})
	}
	vs = sortVersions(vs)
	if len(vs) == 0 {
		c.note("no successful write of the Lease %s/%s in the audit log: no replica ever held it", c.in.LeaseNamespace, c.in.LeaseName)
	}
	var (
		out []*holding
		cur *holding
	)
	for _, v := range vs {
		holder := ""
		if v.obj.Spec.HolderIdentity != nil {
			holder = *v.obj.Spec.HolderIdentity
		}
		end := v.ev.Completed
		if spec := v.obj.Spec; spec.RenewTime != nil && spec.LeaseDurationSeconds != nil {
			end = spec.RenewTime.Add(time.Duration(*spec.LeaseDurationSeconds) * time.Second)
		}
		if cur != nil && holder == cur.identity && !v.ev.Received.After(cur.end) {
			cur.end = end // a renewal
			continue
		}
		if cur != nil {
			// A release (no holder), another identity's acquisition, or a renewal after the
			// Lease ran out: then it is held again from this write on, not in between.
			cur.end = earliest(cur.end, v.ev.Completed)
			cur = nil
		}
		if holder == "" {
			continue
		}
		replica := c.replicaOf(v.ev.Groups)
		if replica == "" {
			c.note("audit %s: Lease acquired for %q by %s without a replica group: its writes are unattributed", v.ev.AuditID, holder, v.ev.User)
		}
		cur = &holding{replica: replica, identity: holder, start: v.ev.Received, end: end}
		out = append(out, cur)
	}
	return out
}

func (c *checker) isLeaseWrite(e *AuditEvent) bool {
	if e.APIGroup != "coordination.k8s.io" || e.Resource != "leases" || !e.Mutating() || e.Namespace != c.in.LeaseNamespace {
		return false
	}
	return e.Name == c.in.LeaseName || (e.Response != nil && e.Response.GetName() == c.in.LeaseName)
}

// exempt reports whether a write of the operator user is no write of a leader's: events (the
// elector's own included), the Lease itself (candidates write it to acquire), access and token
// reviews (questions the webhooks of every replica ask, which store nothing), and admission's
// reservations in ClaimLedgers (every replica admits claims; each such write is conditional on
// the ledger's resourceVersion, and its client says so in its User-Agent).
func (c *checker) exempt(e *AuditEvent) bool {
	switch {
	case e.APIGroup == "policy.sandgate.dev" && e.Resource == "claimledgers" && c.in.AdmissionUserAgent != "" &&
		strings.HasSuffix(e.UserAgent, "/"+c.in.AdmissionUserAgent):
		return true
	case e.Resource == "events" && (e.APIGroup == "" || e.APIGroup == "events.k8s.io"):
		return true
	case e.APIGroup == "authentication.k8s.io" || e.APIGroup == "authorization.k8s.io":
		return true
	}
	return c.isLeaseWrite(e)
}

// checkLeader proves that every successful write of the operator user came from a replica
// that held the Lease when the API server received it.
func (c *checker) checkLeader() {
	if c.in.LeaseName == "" {
		c.note("no leader election Lease given: stale-leader writes not checked")
		return
	}
	holdings := c.leaseTimeline()
	byReplica := map[string][]*holding{}
	for _, h := range holdings {
		byReplica[h.replica] = append(byReplica[h.replica], h)
	}
	for i := range c.in.Audit {
		e := &c.in.Audit[i]
		if e.User != c.in.OperatorUser || !e.Mutating() || !e.Succeeded() || c.exempt(e) {
			continue
		}
		replica := c.replicaOf(e.Groups)
		if replica == "" {
			c.violate(InvariantKnownWriter, writtenObject(e), e.Received, "written by no replica (groups %v): %s", e.Groups, describe(e))
			continue
		}
		if slices.ContainsFunc(byReplica[replica], func(h *holding) bool { return h.holds(e.Received) }) {
			continue
		}
		c.violate(InvariantStaleLeaderWrite, writtenObject(e), e.Received, "written by replica %s while it did not hold the Lease (%s): %s",
			replica, leaseAt(holdings, replica, e.Received), describe(e))
	}
}

func (h *holding) holds(t time.Time) bool { return !t.Before(h.start) && t.Before(h.end) }

// leaseAt says who held the Lease at t and when replica last held it.
func leaseAt(holdings []*holding, replica string, t time.Time) string {
	who := "nobody held it"
	var last *holding
	for _, h := range holdings {
		if h.holds(t) {
			who = fmt.Sprintf("replica %s held it as %s since %s", cmp.Or(h.replica, "<unknown>"), h.identity, timestamp(h.start))
		}
		if h.replica == replica && !h.start.After(t) {
			last = h
		}
	}
	if last == nil {
		return who + "; it had never held it"
	}
	return fmt.Sprintf("%s; its holding as %s ended %s", who, last.identity, timestamp(last.end))
}

// writtenObject names the object of a request: its resource, namespace and name (the
// response's name for a create with generateName).
func writtenObject(e *AuditEvent) string {
	name := e.Name
	if name == "" && e.Response != nil {
		name = e.Response.GetName()
	}
	res := e.Resource
	if e.APIGroup != "" {
		res += "." + e.APIGroup
	}
	if e.Namespace == "" {
		return res + " " + name
	}
	return res + " " + e.Namespace + "/" + name
}

func earliest(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func timestamp(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }
