package operator

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/cbor"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"

	"github.com/sandgate-dev/sandgate/api"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
)

// encodingServer serves a Sandbox list and watch as the API server does: in CBOR when the
// request's Accept header names it first and servesCBOR is set (the CBORServingAndStorage
// gate on), in JSON otherwise. cborServed counts the responses it sent in CBOR.
func encodingServer(t *testing.T, servesCBOR bool, events []watch.Event, list *agentsv1beta1.SandboxList) (srv *httptest.Server, cborServed *atomic.Int32) {
	scheme := api.NewScheme()
	enc := cbor.NewSerializer(scheme, scheme)
	jsonStream := watchStream(t, events...)
	cborServed = &atomic.Int32{}
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/apis/agents.x-k8s.io/v1beta1/sandboxes" {
			http.NotFound(w, r)
			return
		}
		isWatch := r.URL.Query().Get("watch") == "true"
		if !servesCBOR || !strings.HasPrefix(r.Header.Get("Accept"), runtime.ContentTypeCBOR) {
			w.Header().Set("Content-Type", runtime.ContentTypeJSON)
			if isWatch {
				_, _ = w.Write(jsonStream)
			} else {
				_ = json.NewEncoder(w).Encode(list)
			}
			return
		}
		cborServed.Add(1)
		var b bytes.Buffer
		if isWatch {
			w.Header().Set("Content-Type", runtime.ContentTypeCBORSequence)
			for _, e := range events {
				if err := enc.Encode(&metav1.WatchEvent{Type: string(e.Type), Object: runtime.RawExtension{Object: e.Object}}, &b); err != nil {
					t.Error(err)
				}
			}
		} else {
			w.Header().Set("Content-Type", runtime.ContentTypeCBOR)
			if err := enc.Encode(list, &b); err != nil {
				t.Error(err)
			}
		}
		_, _ = w.Write(b.Bytes())
	}))
	t.Cleanup(srv.Close)
	return srv, cborServed
}

// sameFields compares managedFields' field sets as the JSON objects they are: CBOR carries
// them as a map, whose keys come back in CBOR's sorted order.
var sameFields = cmp.Comparer(func(a, b metav1.FieldsV1) bool {
	var x, y any
	return json.Unmarshal(a.GetRawBytes(), &x) == nil && json.Unmarshal(b.GetRawBytes(), &y) == nil && cmp.Equal(x, y)
})

// TestSandboxWatchReadsCBORAndFallsBackToJSON: with APIEncodingCBOR the Sandbox informer's
// list and watch give the informer the objects client-go's JSON decoding gives, whether the
// API server answers in CBOR (its CBORServingAndStorage gate on) or, not serving CBOR, in
// JSON: a cluster without the gate is served as before.
func TestSandboxWatchReadsCBORAndFallsBackToJSON(t *testing.T) {
	if err := allowClientCBOR(); err != nil {
		t.Fatal(err)
	}
	bookmark := &agentsv1beta1.Sandbox{TypeMeta: metav1.TypeMeta{APIVersion: "agents.x-k8s.io/v1beta1", Kind: "Sandbox"},
		ObjectMeta: metav1.ObjectMeta{ResourceVersion: "100007", Annotations: map[string]string{metav1.InitialEventsAnnotationKey: "true"}}}
	modified := poolMember(1)
	modified.Labels["agents.x-k8s.io/claim-uid"] = "9f8e7d6c"
	events := []watch.Event{
		{Type: watch.Added, Object: poolMember(0)},
		{Type: watch.Added, Object: poolMember(1)},
		{Type: watch.Bookmark, Object: bookmark},
		{Type: watch.Modified, Object: modified},
		{Type: watch.Deleted, Object: poolMember(0)},
	}
	list := &agentsv1beta1.SandboxList{TypeMeta: metav1.TypeMeta{APIVersion: "agents.x-k8s.io/v1beta1", Kind: "SandboxList"},
		ListMeta: metav1.ListMeta{ResourceVersion: "100010"}, Items: []agentsv1beta1.Sandbox{*poolMember(2), *poolMember(3)}}

	for _, servesCBOR := range []bool{true, false} {
		srv, cborServed := encodingServer(t, servesCBOR, events, list)
		ours, theirs, pc := clientsOf(t, srv, APIEncodingCBOR)
		ctx := context.Background()

		w, err := sandboxListWatch(ours, pc).WatchFuncWithContext(ctx, metav1.ListOptions{SendInitialEvents: ptr.To(true)})
		if err != nil {
			t.Fatalf("server serves CBOR %v: %v", servesCBOR, err)
		}
		got := received(t, w)
		w, err = theirs.Get().Resource("sandboxes").VersionedParams(&metav1.ListOptions{Watch: true}, pc).Watch(ctx)
		if err != nil {
			t.Fatal(err)
		}
		want := received(t, w)
		if len(want) != len(events) {
			t.Fatalf("client-go decoded %d events of %d: the stream is not what the test means", len(want), len(events))
		}
		if diff := cmp.Diff(want, got, sameFields); diff != "" {
			t.Errorf("server serves CBOR %v: watch events (-client-go JSON +sandgate CBOR):\n%s", servesCBOR, diff)
		}

		gotList, err := sandboxListWatch(ours, pc).ListWithContextFunc(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatalf("server serves CBOR %v: %v", servesCBOR, err)
		}
		wantList := &agentsv1beta1.SandboxList{}
		if err := theirs.Get().Resource("sandboxes").Do(ctx).Into(wantList); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(wantList, gotList, sameFields); diff != "" {
			t.Errorf("server serves CBOR %v: list (-client-go JSON +sandgate CBOR):\n%s", servesCBOR, diff)
		}
		if served, want := cborServed.Load(), map[bool]int32{true: 2, false: 0}[servesCBOR]; served != want {
			t.Errorf("server serves CBOR %v: %d responses in CBOR, want %d (the list and the watch asked for it)", servesCBOR, served, want)
		}
	}
}
