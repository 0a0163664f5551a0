package check

import "time"

// claimFate is what became of one claim the load generator created: when it was created,
// first Ready and first deleted (zero when it was not).
type claimFate struct {
	rec                     *ClaimRecord
	created, ready, deleted time.Time
	// deletedBeforeReady: a delete came first, so the claim was owed nothing.
	deletedBeforeReady bool
}

// fates joins the load generator's records with the audit log: a claim the generator saw no
// answer for (a timeout) counts as created when the log shows it admitted; one whose Ready the
// generator's watch missed counts as Ready when the API server first stored it Ready; a delete
// counts whoever sent it.
func (c *checker) fates() []*claimFate {
	var out []*claimFate
	for i := range c.in.Claims {
		r := &c.in.Claims[i]
		if r.CreateCode >= 400 {
			continue
		}
		key := nsName{r.Namespace, r.Name}
		f := &claimFate{rec: r, created: r.Created, ready: r.Ready, deleted: r.DeleteRequested}
		if ev := c.admitted[key]; f.created.IsZero() && ev != nil {
			f.created = ev.Completed
		}
		if f.created.IsZero() {
			continue
		}
		if t := c.claimReady[key]; f.ready.IsZero() {
			f.ready = t
		}
		if t, ok := c.claimDeleted[key]; ok && (f.deleted.IsZero() || t.Before(f.deleted)) {
			f.deleted = t
		}
		f.deletedBeforeReady = !f.deleted.IsZero() && (f.ready.IsZero() || f.deleted.Before(f.ready))
		out = append(out, f)
	}
	return out
}

// checkRecords proves that refused creates left nothing, that claims are served after the
// faults cleared, and measures recovery and latency.
func (c *checker) checkRecords() {
	final := map[nsName]bool{}
	for i := range c.in.Final.Claims {
		final[nsName{c.in.Final.Claims[i].Namespace, c.in.Final.Claims[i].Name}] = true
	}
	counts := &c.report.Claims
	counts.Admitted = len(c.admitted)
	for i := range c.in.Claims {
		r := &c.in.Claims[i]
		counts.Requested++
		if !c.in.LoadStopped.IsZero() && r.Requested.After(c.in.LoadStopped) {
			c.note("claim %s/%s was requested at %s, after the load stopped (%s)", r.Namespace, r.Name, timestamp(r.Requested), timestamp(c.in.LoadStopped))
		}
		if r.CreateCode < 400 {
			if r.CreateErr != "" && c.admitted[nsName{r.Namespace, r.Name}] == nil {
				counts.Unanswered++
			}
			continue
		}
		counts.Refused++
		key, obj := nsName{r.Namespace, r.Name}, claimObject(r.Namespace, r.Name)
		if ev := c.admitted[key]; ev != nil {
			c.violate(InvariantRefusedCleanly, obj, ev.Received, "create answered %d (%s), yet the API server admitted it: %s", r.CreateCode, r.CreateErr, describe(ev))
		}
		if final[key] {
			c.violate(InvariantRefusedCleanly, obj, time.Time{}, "create answered %d (%s), yet the claim exists", r.CreateCode, r.CreateErr)
		}
	}

	var lastEnd time.Time
	for _, f := range c.in.Faults {
		c.report.FaultsByKind[f.Kind]++
		if f.End.After(lastEnd) {
			lastEnd = f.End
		}
	}
	fates := c.fates()
	var inFaults, outside []time.Duration
	for _, f := range fates {
		counts.Created++
		if !f.ready.IsZero() {
			counts.Served++
			if d := f.ready.Sub(f.created); c.duringFault(f.created) {
				inFaults = append(inFaults, d)
			} else {
				outside = append(outside, d)
			}
		}
		if !f.deleted.IsZero() {
			counts.Deleted++
		}
		if !f.rec.Requested.Before(lastEnd) && f.ready.IsZero() && f.deleted.IsZero() {
			c.violate(InvariantServedAfterRecovery, claimObject(f.rec.Namespace, f.rec.Name), f.rec.Requested,
				"requested after the last fault cleared (%s), never Ready and not deleted", timestamp(lastEnd))
		}
	}
	c.report.LatencyInFaults, c.report.LatencyOutsideFaults = PercentilesOf(inFaults), PercentilesOf(outside)

	reported := map[*ClaimRecord]bool{}
	for _, fault := range c.in.Faults {
		res := c.recovery(fault, fates, reported)
		c.report.Faults = append(c.report.Faults, res)
		c.report.Recovery[fault.Kind] = append(c.report.Recovery[fault.Kind], res.Recovery)
	}
}

// recovery measures one fault: the claims requested before it cleared, not Ready and not
// deleted then, and when the last of them became Ready. A pending claim never Ready and never
// deleted is a violation, reported at the first fault it was pending at.
func (c *checker) recovery(fault Fault, fates []*claimFate, reported map[*ClaimRecord]bool) FaultResult {
	res := FaultResult{Fault: fault}
	var last time.Time
	for _, f := range fates {
		switch {
		case !f.rec.Requested.Before(fault.End),
			!f.ready.IsZero() && !f.ready.After(fault.End),
			!f.deleted.IsZero() && !f.deleted.After(fault.End),
			f.deletedBeforeReady:
			continue
		case f.ready.IsZero():
			res.Pending++
			res.NeverReady++
			if !reported[f.rec] {
				reported[f.rec] = true
				c.violate(InvariantFaultRecovered, claimObject(f.rec.Namespace, f.rec.Name), fault.End,
					"pending when fault %s (%s) cleared, never Ready and not deleted", fault.Kind, fault.Detail)
			}
		default:
			res.Pending++
			if f.ready.After(last) {
				last = f.ready
			}
		}
	}
	if !last.IsZero() {
		res.Recovery = last.Sub(fault.End)
	}
	return res
}

// duringFault reports whether t falls in a fault's window.
func (c *checker) duringFault(t time.Time) bool {
	for _, f := range c.in.Faults {
		if !t.Before(f.Start) && !t.After(f.End) {
			return true
		}
	}
	return false
}
