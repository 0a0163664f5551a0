package operator

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"testing/iotest"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/runtime/serializer/cbor"
	"k8s.io/apimachinery/pkg/runtime/serializer/streaming"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	restclientwatch "k8s.io/client-go/rest/watch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/sandgate-dev/sandgate/api"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
)

// poolMember is a Sandbox as the API server sends a pool member: the template's pod spec,
// the labels and annotations the operator writes, a Ready status and the managedFields of
// its two writers (about 3.5 KB of JSON, as measured on members of the bench's pools).
func poolMember(i int) *agentsv1beta1.Sandbox {
	fields := func(n int) *metav1.FieldsV1 {
		var b bytes.Buffer
		b.WriteString(`{"f:metadata":{"f:annotations":{".":{}`)
		for k := range n {
			fmt.Fprintf(&b, `,"f:agents.x-k8s.io/key-%d":{}`, k)
		}
		b.WriteString(`},"f:labels":{".":{},"f:agents.x-k8s.io/pool":{}}},"f:spec":{".":{},"f:podTemplate":{".":{},"f:spec":{".":{},"f:containers":{}}}}}`)
		return &metav1.FieldsV1{Raw: b.Bytes()}
	}
	now := metav1.NewTime(time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC))
	name := fmt.Sprintf("bench-pool-%05d", i)
	return &agentsv1beta1.Sandbox{
		TypeMeta: metav1.TypeMeta{APIVersion: agentsv1beta1.GroupVersion.String(), Kind: "Sandbox"},
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: "scale-00", UID: "0b6f3c2e-8a41-4d7e-9b1f-2c5d7e9a0f13", ResourceVersion: fmt.Sprint(100000 + i),
			Generation: 1, CreationTimestamp: now,
			Labels: map[string]string{
				"agents.x-k8s.io/pool": "bench-pool", "agents.x-k8s.io/sandbox-template-ref-hash": "7c9d2f4b",
				"agents.x-k8s.io/sandbox-name-hash": "a1b2c3d4",
			},
			Annotations: map[string]string{"agents.x-k8s.io/pod-name": name, "agents.x-k8s.io/template-hash": "5f6e7d8c9b0a"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "extensions.agents.x-k8s.io/v1beta1", Kind: "SandboxWarmPool",
				Name: "bench-pool", UID: "4e2a9c1b-7d3f-4b8e-a6c5-1f0e9d8c7b6a", Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}},
			ManagedFields: []metav1.ManagedFieldsEntry{
				{Manager: "sandgate", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "agents.x-k8s.io/v1beta1", Time: &now, FieldsType: "FieldsV1", FieldsV1: fields(18)},
				{Manager: "sandgate", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "agents.x-k8s.io/v1beta1", Time: &now, FieldsType: "FieldsV1", FieldsV1: fields(10), Subresource: "status"},
			},
		},
		Spec: agentsv1beta1.SandboxSpec{SandboxBlueprint: agentsv1beta1.SandboxBlueprint{PodTemplate: agentsv1beta1.PodTemplate{Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name: "agent", Image: "registry.example/agent-runtime:1.4.2", Command: []string{"/bin/agent", "--listen=:8888"},
				Ports:     []corev1.ContainerPort{{Name: "http", ContainerPort: 8888, Protocol: corev1.ProtocolTCP}},
				Env:       []corev1.EnvVar{{Name: "AGENT_MODE", Value: "sandbox"}, {Name: "LOG_LEVEL", Value: "info"}},
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("128Mi")}},
			}},
			RestartPolicy: corev1.RestartPolicyNever,
		}}}},
		Status: agentsv1beta1.SandboxStatus{
			Conditions: []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, ObservedGeneration: 1, LastTransitionTime: now,
				Reason: "DependenciesReady", Message: "Pod is Ready; Service Exists"}},
			Selector: "agents.x-k8s.io/sandbox-name-hash=a1b2c3d4", PodIPs: []string{"10.0.3.17"}, NodeName: "kwok-node-3",
		},
	}
}

// watchStream is the body of a watch as the API server writes it: one JSON event after the
// other.
func watchStream(t testing.TB, events ...watch.Event) []byte {
	t.Helper()
	var b bytes.Buffer
	for _, e := range events {
		obj, err := json.Marshal(e.Object)
		if err != nil {
			t.Fatal(err)
		}
		line, err := json.Marshal(metav1.WatchEvent{Type: string(e.Type), Object: runtime.RawExtension{Raw: obj}})
		if err != nil {
			t.Fatal(err)
		}
		b.Write(line)
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// sandboxServer serves a watch stream and a list of Sandboxes, as the API server would.
func sandboxServer(t *testing.T, stream []byte, list *agentsv1beta1.SandboxList) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/apis/agents.x-k8s.io/v1beta1/sandboxes" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Query().Get("watch") == "true" {
			_, _ = w.Write(stream)
			return
		}
		_ = json.NewEncoder(w).Encode(list)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// received reads a watch to its end.
func received(t *testing.T, w watch.Interface) []watch.Event {
	t.Helper()
	defer w.Stop()
	var out []watch.Event
	timeout := time.After(10 * time.Second)
	for {
		select {
		case e, ok := <-w.ResultChan():
			if !ok {
				return out
			}
			out = append(out, e)
		case <-timeout:
			t.Fatalf("the watch did not end; %d events so far", len(out))
		}
	}
}

// TestSandboxWatchDecodesAsClientGoDoes: the Sandbox informer's list and watch, decoded by
// sandboxWatchSerializer, give the informer the very events and objects client-go's own
// decoding (controller-runtime's REST client of the kind) gives: Sandboxes added, modified
// and deleted, the bookmark that ends the initial events, and the Status of an ERROR event.
func TestSandboxWatchDecodesAsClientGoDoes(t *testing.T) {
	bookmark := &agentsv1beta1.Sandbox{TypeMeta: metav1.TypeMeta{APIVersion: "agents.x-k8s.io/v1beta1", Kind: "Sandbox"},
		ObjectMeta: metav1.ObjectMeta{ResourceVersion: "100007", Annotations: map[string]string{metav1.InitialEventsAnnotationKey: "true"}}}
	gone := &metav1.Status{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Status"}, Status: metav1.StatusFailure,
		Message: "too old resource version: 1 (100007)", Reason: metav1.StatusReasonExpired, Code: http.StatusGone}
	modified := poolMember(1)
	modified.Labels["agents.x-k8s.io/claim-uid"] = "9f8e7d6c"
	stream := watchStream(t,
		watch.Event{Type: watch.Added, Object: poolMember(0)},
		watch.Event{Type: watch.Added, Object: poolMember(1)},
		watch.Event{Type: watch.Bookmark, Object: bookmark},
		watch.Event{Type: watch.Modified, Object: modified},
		watch.Event{Type: watch.Deleted, Object: poolMember(0)},
		watch.Event{Type: watch.Error, Object: gone},
	)
	list := &agentsv1beta1.SandboxList{TypeMeta: metav1.TypeMeta{APIVersion: "agents.x-k8s.io/v1beta1", Kind: "SandboxList"},
		ListMeta: metav1.ListMeta{ResourceVersion: "100010"}, Items: []agentsv1beta1.Sandbox{*poolMember(2), *poolMember(3)}}
	srv := sandboxServer(t, stream, list)

	ours, theirs, pc := clientsOf(t, srv, APIEncodingJSONFramer)
	ctx := context.Background()
	opts := metav1.ListOptions{SendInitialEvents: ptr.To(true), ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan}

	w, err := sandboxListWatch(ours, pc).WatchFuncWithContext(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	got := received(t, w)
	w, err = theirs.Get().Resource("sandboxes").VersionedParams(&metav1.ListOptions{Watch: true}, pc).Watch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := received(t, w)
	if len(want) != 6 {
		t.Fatalf("client-go decoded %d events of 6: the stream is not what the test means", len(want))
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("watch events (-client-go +sandgate):\n%s", diff)
	}
	if st, ok := got[5].Object.(*metav1.Status); !ok || st.Code != http.StatusGone {
		t.Errorf("ERROR event's object: %#v, want the Status 410 Gone", got[5].Object)
	}

	gotList, err := sandboxListWatch(ours, pc).ListWithContextFunc(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wantList := &agentsv1beta1.SandboxList{}
	if err := theirs.Get().Resource("sandboxes").Do(ctx).Into(wantList); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(wantList, gotList); diff != "" {
		t.Errorf("list (-client-go +sandgate):\n%s", diff)
	}
}

// TestSandboxWatchOnlyForAPlainClusterWideCache: the Sandbox informer is built by
// sandboxInformer only when the cache's Sandbox list and watch are the plain cluster-wide
// ones it makes itself.
func TestSandboxWatchOnlyForAPlainClusterWideCache(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts cache.Options
		want bool
	}{
		{"default options", cacheOptions(DefaultOptions()), true},
		{"scoped child caches", cacheOptions(func() Options { o := DefaultOptions(); o.CacheLabelSelectors = true; return o }()), true},
		{"some namespaces", cacheOptions(func() Options { o := DefaultOptions(); o.CacheNamespaces = []string{"a"}; return o }()), false},
		{"a Sandbox selector", cache.Options{ByObject: map[client.Object]cache.ByObject{&agentsv1beta1.Sandbox{}: {}}}, false},
	} {
		if got := fastSandboxWatch(tc.opts); got != tc.want {
			t.Errorf("%s: fastSandboxWatch = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// BenchmarkSandboxWatchDecode decodes the initial events of a Sandbox informer's watch
// (pool members of about 3.5 KB, managedFields included) as client-go does, as the
// sandboxWatchSerializer does, and, encoded in CBOR, as client-go does with APIEncodingCBOR,
// through the same stream decoding path (framer, event decoder, object decoder) a watch
// request builds.
func BenchmarkSandboxWatchDecode(b *testing.B) {
	const n = 1000
	events := make([]watch.Event, n)
	for i := range events {
		events[i] = watch.Event{Type: watch.Added, Object: poolMember(i)}
	}
	stream := watchStream(b, events...)
	scheme := api.NewScheme()
	codecs := serializer.NewCodecFactory(scheme)
	// The same events in CBOR, as an API server with CBORServingAndStorage sends them.
	var cborStream bytes.Buffer
	enc := cbor.NewSerializer(scheme, scheme)
	for _, e := range events {
		if err := enc.Encode(&metav1.WatchEvent{Type: string(e.Type), Object: runtime.RawExtension{Object: e.Object}}, &cborStream); err != nil {
			b.Fatal(err)
		}
	}
	for _, c := range []struct {
		name      string
		ns        runtime.NegotiatedSerializer
		mediaType string
		stream    []byte
	}{
		{"client-go", serializer.WithoutConversionCodecFactory{CodecFactory: codecs}, runtime.ContentTypeJSON, stream},
		{"sandgate", sandboxWatchSerializer{serializer.WithoutConversionCodecFactory{CodecFactory: codecs}}, runtime.ContentTypeJSON, stream},
		{"cbor", serializer.WithoutConversionCodecFactory{CodecFactory: cborCodecs(scheme)}, runtime.ContentTypeCBOR, cborStream.Bytes()},
	} {
		b.Run(c.name, func(b *testing.B) {
			neg := runtime.NewClientNegotiator(c.ns, agentsv1beta1.GroupVersion)
			b.SetBytes(int64(len(c.stream)))
			b.ReportAllocs()
			for b.Loop() {
				objDec, streamSer, framer, err := neg.StreamDecoder(c.mediaType, nil)
				if err != nil {
					b.Fatal(err)
				}
				d := restclientwatch.NewDecoder(streaming.NewDecoder(framer.NewFrameReader(io.NopCloser(bytes.NewReader(c.stream))), streamSer), objDec)
				for range n {
					if _, _, err := d.Decode(); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*n), "µs/event")
		})
	}
}

// decodeAll decodes a watch stream as a watch request does (framer, event decoder, object
// decoder of the negotiated serializer ns), reading it through read, until the first error.
func decodeAll(t *testing.T, ns runtime.NegotiatedSerializer, stream []byte, read func(io.Reader) io.Reader) ([]watch.Event, error) {
	t.Helper()
	objDec, streamSer, framer, err := runtime.NewClientNegotiator(ns, agentsv1beta1.GroupVersion).StreamDecoder(runtime.ContentTypeJSON, nil)
	if err != nil {
		t.Fatal(err)
	}
	d := restclientwatch.NewDecoder(streaming.NewDecoder(framer.NewFrameReader(io.NopCloser(read(bytes.NewReader(stream)))), streamSer), objDec)
	var out []watch.Event
	for {
		typ, obj, err := d.Decode()
		if err != nil {
			return out, err
		}
		out = append(out, watch.Event{Type: typ, Object: obj})
	}
}

// TestSandboxWatchStreamsDecodeAsClientGoDoes: whatever the stream looks like (events back
// to back or apart, keys in any order, braces and quotes inside strings, escapes in the
// envelope, an event larger than the decoder's first buffer, bytes arriving one at a time, a
// stream cut in the middle of an event), sandboxWatchSerializer's framer and decoders give
// the events and the error client-go's give.
func TestSandboxWatchStreamsDecodeAsClientGoDoes(t *testing.T) {
	sb := func(i int) string {
		s := poolMember(i)
		s.Annotations["note"] = `a "quoted" }{ ][ \ value`
		s.Annotations["odd"] = `one " quote, one } brace`
		b, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	big := poolMember(9)
	big.Annotations["big"] = string(bytes.Repeat([]byte("x}"), 40*1024)) // past the streaming decoder's first 1 KiB and the framer's 32 KiB
	bigJSON, err := json.Marshal(big)
	if err != nil {
		t.Fatal(err)
	}
	codecs := serializer.NewCodecFactory(api.NewScheme())
	plain := serializer.WithoutConversionCodecFactory{CodecFactory: codecs}
	for _, tc := range []struct{ name, stream string }{
		{"back to back", `{"type":"ADDED","object":` + sb(0) + `}{"type":"DELETED","object":` + sb(1) + `}`},
		{"apart, keys reversed", "\n  { \"object\" : " + sb(2) + " ,\n \"type\" : \"MODIFIED\" }\r\n\t" + `{"type":"ADDED","object":` + sb(3) + "}\n"},
		{"escapes in the envelope", `{"typ\u0065":"ADDED","object":` + sb(4) + `}` + "\n" + `{"type":"\u0041DDED","object":` + sb(5) + `}`},
		{"unknown key, null object", `{"type":"BOOKMARK","extra":[1,{"a":"}"}],"object":` + sb(6) + `}{"type":"ADDED","object":null}`},
		{"an event of 80 KiB", `{"type":"ADDED","object":` + string(bigJSON) + `}`},
		{"cut in an event", `{"type":"ADDED","object":` + sb(7) + `}{"type":"ADDED","object":` + sb(8)[:100]},
	} {
		for _, r := range []struct {
			name string
			read func(io.Reader) io.Reader
		}{{"whole", func(r io.Reader) io.Reader { return r }}, {"one byte at a time", iotest.OneByteReader}} {
			t.Run(tc.name+"/"+r.name, func(t *testing.T) {
				want, wantErr := decodeAll(t, plain, []byte(tc.stream), r.read)
				if len(want) == 0 {
					t.Fatalf("client-go decoded no event (%v): the stream is not what the test means", wantErr)
				}
				got, gotErr := decodeAll(t, sandboxWatchSerializer{plain}, []byte(tc.stream), r.read)
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("events (-client-go +sandgate):\n%s", diff)
				}
				if (wantErr == nil) != (gotErr == nil) || (wantErr != nil && (wantErr == io.EOF) != (gotErr == io.EOF)) {
					t.Errorf("stream ended with %v, client-go's with %v", gotErr, wantErr)
				}
			})
		}
	}
}

// TestSandboxWatchPassesAFailedReadOn: a read that fails inside an event ends the watch with
// that error, as client-go's framer does, not with an unexpected EOF: the watch's error
// handling tells a broken connection from a stream that ended.
func TestSandboxWatchPassesAFailedReadOn(t *testing.T) {
	b, err := json.Marshal(poolMember(0))
	if err != nil {
		t.Fatal(err)
	}
	stream := []byte(`{"type":"ADDED","object":` + string(b)[:200])
	codecs := serializer.NewCodecFactory(api.NewScheme())
	plain := serializer.WithoutConversionCodecFactory{CodecFactory: codecs}
	_, want := decodeAll(t, plain, stream, iotest.TimeoutReader)
	_, got := decodeAll(t, sandboxWatchSerializer{plain}, stream, iotest.TimeoutReader)
	if !errors.Is(want, iotest.ErrTimeout) {
		t.Fatalf("client-go's decoding ended with %v, not the read's error: the test is not what it means", want)
	}
	if !errors.Is(got, iotest.ErrTimeout) {
		t.Errorf("the watch ended with %v, want the failed read's %v", got, iotest.ErrTimeout)
	}
}

// clientsOf are two REST clients of Sandboxes served by srv: the Sandbox informer's, reading
// with encoding, and controller-runtime's own (client-go's JSON decoding), to compare it with;
// and the parameter codec both take.
func clientsOf(t *testing.T, srv *httptest.Server, encoding APIEncoding) (ours, theirs rest.Interface, pc runtime.ParameterCodec) {
	t.Helper()
	scheme := api.NewScheme()
	cfg := &rest.Config{Host: srv.URL}
	ours, err := sandboxRESTClient(cfg, srv.Client(), scheme, encoding)
	if err != nil {
		t.Fatal(err)
	}
	theirs, err = apiutil.RESTClientForGVK(sandboxGVK, false, false, cfg, serializer.NewCodecFactory(scheme), srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	return ours, theirs, runtime.NewParameterCodec(scheme)
}
