package check

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"
)

// AuditPolicy is the kube-apiserver audit policy (audit.k8s.io/v1 Policy) a soak runs with so
// that Check has what it needs, and no more: the resulting object of every write of a Sandbox,
// a claim (status included) and a Lease, for the binding and leader timelines; who wrote
// everything else, for the stale-leader check (the catch-all rule covers pods, pods/eviction,
// services, persistentvolumeclaims, networkpolicies, warm pools and templates, and whatever
// else the operator may write, so that no write of a deposed leader goes unseen). Reads,
// events and the nodes' heartbeat Leases are not logged: they are most of the traffic and
// decide nothing here. Stage RequestReceived is omitted: Check reads ResponseComplete only.
const AuditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages:
  - RequestReceived
rules:
  - level: None
    verbs: ["get", "list", "watch"]
  - level: None
    resources:
      - group: ""
        resources: ["events"]
      - group: "events.k8s.io"
        resources: ["events"]
  - level: None
    namespaces: ["kube-node-lease"]
    resources:
      - group: "coordination.k8s.io"
        resources: ["leases"]
  - level: RequestResponse
    verbs: ["create", "update", "patch", "delete", "deletecollection"]
    resources:
      - group: "agents.x-k8s.io"
        resources: ["sandboxes", "sandboxes/status"]
      - group: "extensions.agents.x-k8s.io"
        resources: ["sandboxclaims", "sandboxclaims/status"]
      - group: "coordination.k8s.io"
        resources: ["leases"]
  - level: Metadata
    verbs: ["create", "update", "patch", "delete", "deletecollection"]
`

// AuditEvent is what Check reads of one audit.k8s.io/v1 Event at stage ResponseComplete.
type AuditEvent struct {
	// AuditID is the API server's ID of the request.
	AuditID string
	// Verb is the request's verb: create, update, patch, delete, deletecollection, get, ...
	Verb string
	// User and Groups are the authenticated requester.
	User   string
	Groups []string
	// UserAgent is the client's User-Agent header.
	UserAgent string
	// APIGroup, APIVersion, Resource, Subresource, Namespace and Name are the object
	// reference. Name is empty for a create with generateName: the name is in Response.
	APIGroup, APIVersion, Resource, Subresource, Namespace, Name string
	// Code is the HTTP status code of the response.
	Code int
	// Received is requestReceivedTimestamp, Completed the stage timestamp (response sent).
	Received, Completed time.Time
	// Response is the responseObject when the policy logged it (level RequestResponse): the
	// object as written, a Status (a delete, an error) or a list; nil otherwise.
	Response *unstructured.Unstructured
}

// Succeeded reports whether the request succeeded (2xx or 3xx).
func (e *AuditEvent) Succeeded() bool { return e.Code >= 200 && e.Code < 400 }

// Mutating reports whether the verb writes.
func (e *AuditEvent) Mutating() bool {
	switch e.Verb {
	case "create", "update", "patch", "delete", "deletecollection":
		return true
	}
	return false
}

// wireEvent is the part of an audit.k8s.io/v1 Event that AuditEvent takes.
type wireEvent struct {
	Kind       string `json:"kind"`
	APIVersion string `json:"apiVersion"`
	AuditID    string `json:"auditID"`
	Stage      string `json:"stage"`
	Verb       string `json:"verb"`
	User       struct {
		Username string   `json:"username"`
		Groups   []string `json:"groups"`
	} `json:"user"`
	UserAgent string `json:"userAgent"`
	ObjectRef *struct {
		Resource    string `json:"resource"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
		APIGroup    string `json:"apiGroup"`
		APIVersion  string `json:"apiVersion"`
		Subresource string `json:"subresource"`
	} `json:"objectRef"`
	ResponseStatus *struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
	ResponseObject           map[string]any `json:"responseObject"`
	RequestReceivedTimestamp time.Time      `json:"requestReceivedTimestamp"`
	StageTimestamp           time.Time      `json:"stageTimestamp"`
}

const (
	auditAPIVersion       = "audit.k8s.io/v1"
	stageResponseComplete = "ResponseComplete"
	// maxLineErrors bounds the malformed lines ReadAuditLog names: past a few, the file is
	// not an audit log and more lines say nothing new.
	maxLineErrors = 10
)

// eventStart begins every line the API server's JSON log backend writes (kind and apiVersion
// come first). A restarted API server appends to the file its predecessor was killed while
// writing, so a truncated event can be followed, on the same line, by a whole one.
var eventStart = []byte(`{"kind":"Event","apiVersion":"` + auditAPIVersion + `"`)

// ReadAuditLog reads an API server audit log in JSON lines format and returns its events at
// stage ResponseComplete, in file order. It tolerates truncation, which a killed API server
// leaves: an unterminated last line that does not parse is skipped, and so is the truncated
// head of a line that continues with a whole event (a restarted API server appended to the
// file). Every other line that is not an audit.k8s.io/v1 Event is an error naming its line
// number; the events of the other lines are returned with it.
func ReadAuditLog(r io.Reader) ([]AuditEvent, error) {
	br := bufio.NewReaderSize(r, 1<<20)
	var (
		events []AuditEvent
		errs   []error
		bad    int
	)
	for n := 1; ; n++ {
		line, readErr := br.ReadBytes('\n')
		if readErr != nil && !errors.Is(readErr, io.EOF) {
			return events, fmt.Errorf("reading audit log line %d: %w", n, readErr)
		}
		terminated := len(line) > 0 && line[len(line)-1] == '\n'
		if line = bytes.TrimSpace(line); len(line) > 0 {
			ev, ok, err := decodeLine(line)
			switch {
			case err != nil && !terminated && errors.Is(readErr, io.EOF):
				// The last line, cut off mid-write: what a killed API server leaves.
			case err != nil:
				bad++
				if bad <= maxLineErrors {
					errs = append(errs, fmt.Errorf("audit log line %d: %w", n, err))
				}
			case ok:
				events = append(events, ev)
			}
		}
		if readErr != nil {
			break
		}
	}
	if bad > maxLineErrors {
		errs = append(errs, fmt.Errorf("%d more malformed lines", bad-maxLineErrors))
	}
	return events, errors.Join(errs...)
}

// decodeLine decodes one line; ok is false for an event of another stage. A line that does not
// parse but holds the start of another event after its own is decoded from there on.
func decodeLine(line []byte) (AuditEvent, bool, error) {
	ev, ok, err := decodeEvent(line)
	if err == nil {
		return ev, ok, nil
	}
	if at := bytes.LastIndex(line, eventStart); at > 0 {
		if ev, ok, err2 := decodeEvent(line[at:]); err2 == nil {
			return ev, ok, nil
		}
	}
	return AuditEvent{}, false, err
}

func decodeEvent(line []byte) (AuditEvent, bool, error) {
	var w wireEvent
	// utiljson keeps whole numbers int64, as unstructured objects need them.
	if err := utiljson.Unmarshal(line, &w); err != nil {
		return AuditEvent{}, false, fmt.Errorf("decoding audit event: %w", err)
	}
	if w.Kind != "Event" || w.APIVersion != auditAPIVersion {
		return AuditEvent{}, false, fmt.Errorf("not an %s Event: kind %q, apiVersion %q", auditAPIVersion, w.Kind, w.APIVersion)
	}
	if w.Stage != stageResponseComplete {
		return AuditEvent{}, false, nil
	}
	ev := AuditEvent{
		AuditID:   w.AuditID,
		Verb:      w.Verb,
		User:      w.User.Username,
		Groups:    w.User.Groups,
		UserAgent: w.UserAgent,
		Received:  w.RequestReceivedTimestamp,
		Completed: w.StageTimestamp,
	}
	if ref := w.ObjectRef; ref != nil {
		ev.APIGroup, ev.APIVersion, ev.Resource, ev.Subresource = ref.APIGroup, ref.APIVersion, ref.Resource, ref.Subresource
		ev.Namespace, ev.Name = ref.Namespace, ref.Name
	}
	if w.ResponseStatus != nil {
		ev.Code = w.ResponseStatus.Code
	}
	if w.ResponseObject != nil {
		ev.Response = &unstructured.Unstructured{Object: w.ResponseObject}
	}
	return ev, true, nil
}
