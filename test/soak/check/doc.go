// Package check is the checker of the fault soak: it proves, after the fact, that no
// invariant broke while two operator replicas served a steady claim load through injected
// faults. The soak (test/soak) runs the API server with AuditPolicy, reads the audit log
// with ReadAuditLog and hands it to Check with the load generator's ClaimRecords, the Faults
// and the Final State listed once everything settled.
//
// What the audit log gives, under AuditPolicy: every successful write of a Sandbox, a claim
// and the leader election Lease with the object it left, and who made every other write.
// Check orders each object's versions by resourceVersion (etcd revisions: the order in which
// the writes took effect, whatever order the log has them in) and follows:
//   - each claim's stamp: set at admission, changed by the operator only;
//   - each Sandbox's binding (its claim-uid label, or its controller reference to a claim):
//     made by the operator only, once per Sandbox, and never two at once for one claim;
//   - the Lease's holders, and every write of the operator user against them: a replica
//     writes only while it holds the Lease (from its acquisition to the first of its last
//     renewal's expiry, its release and another identity's acquisition).
//
// The final state shows what was left: every claim served by one Sandbox of its stamped
// template version, no Sandbox, pod, PVC, Service or NetworkPolicy without its owner, every
// pool full. The load generator's records show what clients saw: refused creates that left
// nothing, claims served after the faults, and how long each fault's pending claims took.
//
// Check reports every violation (Report.Violations, named by the Invariant* constants) and
// measures; it decides nothing about timings. It links no testing package: the dev command
// test/cmd/sandgate-bench may run it.
package check
