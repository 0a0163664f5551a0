package check

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"k8s.io/apimachinery/pkg/runtime"
	auditinternal "k8s.io/apiserver/pkg/apis/audit"
	auditpolicy "k8s.io/apiserver/pkg/audit/policy"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"

	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
)

// Lines in the shape kube-apiserver's JSON log backend writes them.
const (
	claimCreateLine   = `{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"RequestResponse","auditID":"6f0e1c2a-0001","stage":"ResponseComplete","requestURI":"/apis/extensions.agents.x-k8s.io/v1beta1/namespaces/soak/sandboxclaims","verb":"create","user":{"username":"soak-load","groups":["system:authenticated"]},"sourceIPs":["127.0.0.1"],"userAgent":"sandgate-bench/v0.1.0","objectRef":{"resource":"sandboxclaims","namespace":"soak","name":"c1","apiGroup":"extensions.agents.x-k8s.io","apiVersion":"v1beta1"},"responseStatus":{"metadata":{},"code":201},"requestObject":{"apiVersion":"extensions.agents.x-k8s.io/v1beta1","kind":"SandboxClaim","metadata":{"name":"c1","namespace":"soak"},"spec":{"warmPoolRef":{"name":"pool"}}},"responseObject":{"apiVersion":"extensions.agents.x-k8s.io/v1beta1","kind":"SandboxClaim","metadata":{"annotations":{"agents.x-k8s.io/sandbox-template-hash":"5f2b9c0d1e3a4b5c6d7e8f9012345678","agents.x-k8s.io/webhook-first-observed-at":"2026-11-25T10:00:02.004Z"},"creationTimestamp":"2026-11-25T10:00:02Z","generation":1,"name":"c1","namespace":"soak","resourceVersion":"1234","uid":"0b9f6a8e-c1"},"spec":{"warmPoolRef":{"name":"pool"}}},"requestReceivedTimestamp":"2026-11-25T10:00:02.000123Z","stageTimestamp":"2026-11-25T10:00:02.010456Z","annotations":{"authorization.k8s.io/decision":"allow","authorization.k8s.io/reason":""}}`
	podPatchLine      = `{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"6f0e1c2a-0002","stage":"ResponseComplete","requestURI":"/api/v1/namespaces/soak/pods/pool-abc","verb":"patch","user":{"username":"system:serviceaccount:sandgate-system:sandgate","groups":["system:authenticated","sandgate.dev/replica:a"]},"sourceIPs":["127.0.0.1"],"userAgent":"sandgate/v0.1.0","objectRef":{"resource":"pods","namespace":"soak","name":"pool-abc","apiVersion":"v1"},"responseStatus":{"metadata":{},"code":200},"requestReceivedTimestamp":"2026-11-25T10:00:02.150000Z","stageTimestamp":"2026-11-25T10:00:02.155000Z"}`
	watchStartedLine  = `{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"6f0e1c2a-0003","stage":"ResponseStarted","requestURI":"/api/v1/pods?watch=true","verb":"watch","user":{"username":"system:kube-scheduler"},"objectRef":{"resource":"pods","apiVersion":"v1"},"responseStatus":{"metadata":{},"code":200},"requestReceivedTimestamp":"2026-11-25T10:00:02.200000Z","stageTimestamp":"2026-11-25T10:00:02.200100Z"}`
	sandboxDeleteLine = `{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"RequestResponse","auditID":"6f0e1c2a-0004","stage":"ResponseComplete","requestURI":"/apis/agents.x-k8s.io/v1beta1/namespaces/soak/sandboxes/pool-def","verb":"delete","user":{"username":"system:serviceaccount:kube-system:generic-garbage-collector","groups":["system:serviceaccounts","system:serviceaccounts:kube-system","system:authenticated"]},"objectRef":{"resource":"sandboxes","namespace":"soak","name":"pool-def","apiGroup":"agents.x-k8s.io","apiVersion":"v1beta1"},"responseStatus":{"metadata":{},"status":"Success","code":200},"requestObject":{"kind":"DeleteOptions","apiVersion":"meta.k8s.io/__internal","propagationPolicy":"Background"},"responseObject":{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Success","details":{"name":"pool-def","group":"agents.x-k8s.io","kind":"sandboxes","uid":"def-uid"}},"requestReceivedTimestamp":"2026-11-25T10:00:35.100000Z","stageTimestamp":"2026-11-25T10:00:35.104000Z"}`
)

func TestReadAuditLogDecodesResponseCompleteEvents(t *testing.T) {
	log := strings.Join([]string{claimCreateLine, podPatchLine, watchStartedLine, sandboxDeleteLine}, "\n") + "\n"
	events, err := ReadAuditLog(strings.NewReader(log))
	if err != nil {
		t.Fatalf("ReadAuditLog: %v", err)
	}
	received := time.Date(2026, 11, 25, 10, 0, 2, 123_000, time.UTC)
	want := []AuditEvent{
		{AuditID: "6f0e1c2a-0001", Verb: "create", User: "soak-load", Groups: []string{"system:authenticated"}, UserAgent: "sandgate-bench/v0.1.0",
			APIGroup: "extensions.agents.x-k8s.io", APIVersion: "v1beta1", Resource: "sandboxclaims", Namespace: "soak", Name: "c1",
			Code: 201, Received: received, Completed: time.Date(2026, 11, 25, 10, 0, 2, 10_456_000, time.UTC)},
		{AuditID: "6f0e1c2a-0002", Verb: "patch", User: "system:serviceaccount:sandgate-system:sandgate",
			Groups: []string{"system:authenticated", "sandgate.dev/replica:a"}, UserAgent: "sandgate/v0.1.0",
			APIVersion: "v1", Resource: "pods", Namespace: "soak", Name: "pool-abc", Code: 200,
			Received: time.Date(2026, 11, 25, 10, 0, 2, 150_000_000, time.UTC), Completed: time.Date(2026, 11, 25, 10, 0, 2, 155_000_000, time.UTC)},
		{AuditID: "6f0e1c2a-0004", Verb: "delete", User: "system:serviceaccount:kube-system:generic-garbage-collector",
			Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated"},
			APIGroup: "agents.x-k8s.io", APIVersion: "v1beta1", Resource: "sandboxes", Namespace: "soak", Name: "pool-def", Code: 200,
			Received: time.Date(2026, 11, 25, 10, 0, 35, 100_000_000, time.UTC), Completed: time.Date(2026, 11, 25, 10, 0, 35, 104_000_000, time.UTC)},
	}
	if diff := cmp.Diff(want, events, cmpopts.IgnoreFields(AuditEvent{}, "Response")); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if len(events) != 3 {
		return
	}
	if events[1].Response != nil {
		t.Errorf("a Metadata event has a response: %v", events[1].Response)
	}
	if uid := events[2].Response.Object["details"].(map[string]any)["uid"]; uid != "def-uid" {
		t.Errorf("delete Status names uid %v, want def-uid", uid)
	}
	// The response decodes into the API type: numbers stay integers.
	var claim extv1beta1.SandboxClaim
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(events[0].Response.Object, &claim); err != nil {
		t.Fatalf("decoding the claim: %v", err)
	}
	if claim.Generation != 1 || claim.ResourceVersion != "1234" || claim.UID != "0b9f6a8e-c1" ||
		claim.Annotations[agentsv1beta1.AnnotationSandboxTemplateHash] != "5f2b9c0d1e3a4b5c6d7e8f9012345678" {
		t.Errorf("decoded claim %+v", claim.ObjectMeta)
	}
}

func TestReadAuditLogToleratesTruncationAndNamesMalformedLines(t *testing.T) {
	truncated := claimCreateLine[:len(claimCreateLine)/2]
	cases := map[string]struct {
		log         string
		wantIDs     []string
		wantErrPart string // "" for no error
	}{
		"a truncated last line": {
			log:     podPatchLine + "\n" + sandboxDeleteLine + "\n" + truncated,
			wantIDs: []string{"6f0e1c2a-0002", "6f0e1c2a-0004"},
		},
		"a truncated event continued by a restarted API server": {
			log:     podPatchLine + "\n" + truncated + sandboxDeleteLine + "\n" + claimCreateLine + "\n",
			wantIDs: []string{"6f0e1c2a-0002", "6f0e1c2a-0004", "6f0e1c2a-0001"},
		},
		"blank lines and no trailing newline": {
			log:     "\n" + podPatchLine + "\n\n" + sandboxDeleteLine,
			wantIDs: []string{"6f0e1c2a-0002", "6f0e1c2a-0004"},
		},
		"an empty log": {},
		"a truncated line in the middle": {
			log:         podPatchLine + "\n" + truncated + "\n" + sandboxDeleteLine + "\n",
			wantIDs:     []string{"6f0e1c2a-0002", "6f0e1c2a-0004"},
			wantErrPart: "audit log line 2: decoding audit event",
		},
		"a line that is not an audit event": {
			log:         podPatchLine + "\n" + `{"kind":"Status","apiVersion":"v1","status":"Failure"}` + "\n",
			wantIDs:     []string{"6f0e1c2a-0002"},
			wantErrPart: `audit log line 2: not an audit.k8s.io/v1 Event: kind "Status"`,
		},
		"many malformed lines": {
			log:         strings.Repeat("garbage\n", 12) + podPatchLine + "\n",
			wantIDs:     []string{"6f0e1c2a-0002"},
			wantErrPart: "audit log line 10: decoding audit event: invalid character 'g' looking for beginning of value\n2 more malformed lines",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			events, err := ReadAuditLog(strings.NewReader(tc.log))
			var ids []string
			for _, e := range events {
				ids = append(ids, e.AuditID)
			}
			if diff := cmp.Diff(tc.wantIDs, ids); diff != "" {
				t.Errorf("audit IDs (-want +got):\n%s", diff)
			}
			switch {
			case tc.wantErrPart == "" && err != nil:
				t.Errorf("ReadAuditLog: %v", err)
			case tc.wantErrPart != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErrPart)):
				t.Errorf("ReadAuditLog error %v, want one saying %q", err, tc.wantErrPart)
			}
		})
	}
}

// The policy parses as kube-apiserver parses it, and logs at the level Check needs what the
// API server's own evaluator says it does.
func TestAuditPolicyLogsWhatCheckNeeds(t *testing.T) {
	p, err := auditpolicy.LoadPolicyFromBytes([]byte(AuditPolicy))
	if err != nil {
		t.Fatalf("loading AuditPolicy: %v", err)
	}
	eval := auditpolicy.NewPolicyRuleEvaluator(p)
	operator := &user.DefaultInfo{Name: operatorUser, Groups: groupsOf("a")}
	cases := map[string]struct {
		verb, group, resource, sub, ns string
		want                           auditinternal.Level
	}{
		"a Sandbox create":           {verb: "create", group: "agents.x-k8s.io", resource: "sandboxes", ns: testNS, want: auditinternal.LevelRequestResponse},
		"a Sandbox patch":            {verb: "patch", group: "agents.x-k8s.io", resource: "sandboxes", ns: testNS, want: auditinternal.LevelRequestResponse},
		"a Sandbox status update":    {verb: "update", group: "agents.x-k8s.io", resource: "sandboxes", sub: "status", ns: testNS, want: auditinternal.LevelRequestResponse},
		"a Sandbox delete":           {verb: "delete", group: "agents.x-k8s.io", resource: "sandboxes", ns: testNS, want: auditinternal.LevelRequestResponse},
		"a claim create":             {verb: "create", group: "extensions.agents.x-k8s.io", resource: "sandboxclaims", ns: testNS, want: auditinternal.LevelRequestResponse},
		"a claim status patch":       {verb: "patch", group: "extensions.agents.x-k8s.io", resource: "sandboxclaims", sub: "status", ns: testNS, want: auditinternal.LevelRequestResponse},
		"a claim deletecollection":   {verb: "deletecollection", group: "extensions.agents.x-k8s.io", resource: "sandboxclaims", ns: testNS, want: auditinternal.LevelRequestResponse},
		"a Lease renewal":            {verb: "update", group: "coordination.k8s.io", resource: "leases", ns: leaseNS, want: auditinternal.LevelRequestResponse},
		"a node heartbeat":           {verb: "update", group: "coordination.k8s.io", resource: "leases", ns: "kube-node-lease", want: auditinternal.LevelNone},
		"a pod patch":                {verb: "patch", resource: "pods", ns: testNS, want: auditinternal.LevelMetadata},
		"a pod eviction":             {verb: "create", resource: "pods", sub: "eviction", ns: testNS, want: auditinternal.LevelMetadata},
		"a Service create":           {verb: "create", resource: "services", ns: testNS, want: auditinternal.LevelMetadata},
		"a PVC delete":               {verb: "delete", resource: "persistentvolumeclaims", ns: testNS, want: auditinternal.LevelMetadata},
		"a NetworkPolicy patch":      {verb: "patch", group: "networking.k8s.io", resource: "networkpolicies", ns: testNS, want: auditinternal.LevelMetadata},
		"a pool status patch":        {verb: "patch", group: "extensions.agents.x-k8s.io", resource: "sandboxwarmpools", sub: "status", ns: testNS, want: auditinternal.LevelMetadata},
		"a template update":          {verb: "update", group: "extensions.agents.x-k8s.io", resource: "sandboxtemplates", ns: testNS, want: auditinternal.LevelMetadata},
		"a Secret update":            {verb: "update", resource: "secrets", ns: leaseNS, want: auditinternal.LevelMetadata},
		"a Sandbox get":              {verb: "get", group: "agents.x-k8s.io", resource: "sandboxes", ns: testNS, want: auditinternal.LevelNone},
		"a claim list":               {verb: "list", group: "extensions.agents.x-k8s.io", resource: "sandboxclaims", want: auditinternal.LevelNone},
		"a Lease watch":              {verb: "watch", group: "coordination.k8s.io", resource: "leases", ns: leaseNS, want: auditinternal.LevelNone},
		"an event create":            {verb: "create", resource: "events", ns: testNS, want: auditinternal.LevelNone},
		"an events.k8s.io event":     {verb: "patch", group: "events.k8s.io", resource: "events", ns: testNS, want: auditinternal.LevelNone},
		"a pod status update by all": {verb: "update", resource: "pods", sub: "status", ns: testNS, want: auditinternal.LevelMetadata},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := eval.EvaluatePolicyRule(&authorizer.AttributesRecord{
				User: operator, Verb: tc.verb, Namespace: tc.ns, APIGroup: tc.group, APIVersion: "v1",
				Resource: tc.resource, Subresource: tc.sub, Name: "x", ResourceRequest: true,
			})
			if got.Level != tc.want {
				t.Errorf("level %s, want %s", got.Level, tc.want)
			}
			if tc.want != auditinternal.LevelNone && !contains(got.OmitStages, auditinternal.StageRequestReceived) {
				t.Errorf("stages omitted %v, want RequestReceived among them", got.OmitStages)
			}
		})
	}
}

func contains(stages []auditinternal.Stage, s auditinternal.Stage) bool {
	for _, st := range stages {
		if st == s {
			return true
		}
	}
	return false
}
