package operator

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	kjson "sigs.k8s.io/json"

	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
)

// Sandboxes are the operator's largest informer (one per pool member and per claim) and,
// being custom resources, come as JSON: at 20,000 of them, decoding the initial events is
// most of a restart's time to its first claim (a CPU profile of the restart put 58% of the
// operator's CPU in the watch decoding, on one goroutine). client-go reads each event's
// bytes about nine times: its framer scans the event with encoding/json and scans it again
// to copy it out; the event's decoder scans it to find a kind (Interpret, a decode of its
// own) and again to decode the envelope; the object's decoder does the same with the
// object. The Sandbox informer's events are known to be Sandboxes, so sandboxWatchSerializer
// frames the stream with one structural scan (jsonFramer), splits the envelope without
// decoding the object (splitEvent) and decodes the object straight into a Sandbox
// (sandboxDecoder): three reads instead of nine. What it does not read plainly (escapes in
// the envelope, another kind, lists, errors) goes through the codec factory's serializer, as
// before. BenchmarkSandboxWatchDecode measures both on the same stream.

// sandboxGVK is the kind the Sandbox informer watches (the storage version).
var sandboxGVK = agentsv1beta1.GroupVersion.WithKind("Sandbox")

// sandboxInformer returns the cache's informer constructor: Sandboxes are listed and
// watched through a REST client of their own with sandboxWatchSerializer, every other kind
// as controller-runtime builds it. It is used only for a cluster-wide cache with no selector
// on Sandboxes, whose list and watch are the plain ones it makes itself.
func sandboxInformer(cfg *rest.Config, httpClient *http.Client, scheme *runtime.Scheme, encoding APIEncoding) (func(toolscache.ListerWatcher, runtime.Object, time.Duration, toolscache.Indexers) toolscache.SharedIndexInformer, error) {
	rc, err := sandboxRESTClient(cfg, httpClient, scheme, encoding)
	if err != nil {
		return nil, err
	}
	lw := sandboxListWatch(rc, runtime.NewParameterCodec(scheme))
	return func(given toolscache.ListerWatcher, obj runtime.Object, resync time.Duration, indexers toolscache.Indexers) toolscache.SharedIndexInformer {
		if _, ok := obj.(*agentsv1beta1.Sandbox); ok {
			given = lw
		}
		return toolscache.NewSharedIndexInformer(given, obj, resync, indexers)
	}, nil
}

// fastSandboxWatch reports whether the cache's Sandbox informer may be built by
// sandboxInformer: it watches every namespace, with no label or field selector.
func fastSandboxWatch(o cache.Options) bool {
	if len(o.DefaultNamespaces) > 0 || o.DefaultLabelSelector != nil || o.DefaultFieldSelector != nil {
		return false
	}
	for obj := range o.ByObject {
		if _, ok := obj.(*agentsv1beta1.Sandbox); ok {
			return false
		}
	}
	return true
}

// sandboxRESTClient is a REST client of the Sandbox resource that decodes JSON with
// sandboxWatchSerializer. With APIEncodingCBOR it asks for CBOR first (and takes the JSON of a
// server that does not serve CBOR), which the codec factory's CBOR serializer decodes
// (cborCodecs); otherwise it asks for JSON.
func sandboxRESTClient(cfg *rest.Config, httpClient *http.Client, scheme *runtime.Scheme, encoding APIEncoding) (*rest.RESTClient, error) {
	c := rest.CopyConfig(cfg)
	gv := agentsv1beta1.GroupVersion
	c.GroupVersion = &gv
	c.APIPath = "/apis"
	c.ContentType = runtime.ContentTypeJSON
	codecs := serializer.NewCodecFactory(scheme)
	if encoding == APIEncodingCBOR {
		c.ContentType = runtime.ContentTypeCBOR
		codecs = cborCodecs(scheme)
	}
	c.NegotiatedSerializer = sandboxWatchSerializer{serializer.WithoutConversionCodecFactory{CodecFactory: codecs}}
	if c.UserAgent == "" {
		c.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	rc, err := rest.RESTClientForConfigAndClient(c, httpClient)
	if err != nil {
		return nil, fmt.Errorf("building the Sandbox informer's client: %w", err)
	}
	return rc, nil
}

// sandboxListWatch lists and watches Sandboxes in every namespace, as controller-runtime's
// cache does for a typed object (bookmarks on).
func sandboxListWatch(rc rest.Interface, pc runtime.ParameterCodec) *toolscache.ListWatch {
	return &toolscache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			list := &agentsv1beta1.SandboxList{}
			if err := rc.Get().Resource("sandboxes").VersionedParams(&opts, pc).Do(ctx).Into(list); err != nil {
				return nil, err
			}
			return list, nil
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			opts.Watch = true
			opts.AllowWatchBookmarks = true
			return rc.Get().Resource("sandboxes").VersionedParams(&opts, pc).Watch(ctx)
		},
	}
}

// sandboxWatchSerializer is a client's negotiated serializer whose JSON decoders skip the
// kind lookup for watch events (metav1.WatchEvent) and for the Sandboxes in them.
type sandboxWatchSerializer struct {
	runtime.NegotiatedSerializer
}

func (s sandboxWatchSerializer) SupportedMediaTypes() []runtime.SerializerInfo {
	infos := slices.Clone(s.NegotiatedSerializer.SupportedMediaTypes())
	for i, info := range infos {
		if info.MediaType != runtime.ContentTypeJSON {
			continue
		}
		info.Serializer = sandboxDecoder{Serializer: info.Serializer}
		if info.StreamSerializer != nil {
			ss := *info.StreamSerializer
			ss.Serializer = watchEventDecoder{Serializer: ss.Serializer}
			ss.Framer = jsonFramer{Framer: ss.Framer}
			info.StreamSerializer = &ss
		}
		infos[i] = info
	}
	return infos
}

// watchEventDecoder decodes a watch event's frame into the metav1.WatchEvent it is asked
// for without looking up its kind first (an event's envelope has none); anything else as
// the serializer it wraps.
type watchEventDecoder struct {
	runtime.Serializer
}

var watchEventGVK = metav1.SchemeGroupVersion.WithKind("WatchEvent")

func (d watchEventDecoder) Decode(data []byte, defaults *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	ev, ok := into.(*metav1.WatchEvent)
	if !ok {
		return d.Serializer.Decode(data, defaults, into)
	}
	*ev = metav1.WatchEvent{}
	if typ, object, ok := splitEvent(data); ok {
		ev.Type = typ
		if string(object) != "null" {
			ev.Object.Raw = bytes.Clone(object)
		}
	} else if err := kjson.UnmarshalCaseSensitivePreserveInts(data, ev); err != nil {
		return nil, nil, fmt.Errorf("decoding a watch event: %w", err)
	}
	gvk := watchEventGVK
	return ev, &gvk, nil
}

// sandboxDecoder decodes an object the caller has no type for (a watch event's object) as a
// Sandbox, and falls back to the serializer it wraps when the object turns out to be of
// another kind (the Status of an ERROR event) or when the caller names the type (lists,
// errors): those are decoded as client-go decodes them.
type sandboxDecoder struct {
	runtime.Serializer
}

func (d sandboxDecoder) Decode(data []byte, defaults *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	if into != nil {
		return d.Serializer.Decode(data, defaults, into)
	}
	sb := &agentsv1beta1.Sandbox{}
	if err := kjson.UnmarshalCaseSensitivePreserveInts(data, sb); err == nil && sb.GroupVersionKind() == sandboxGVK {
		gvk := sandboxGVK
		return sb, &gvk, nil
	}
	// Not a Sandbox (a Status does not even fit one: its status is a string), or not JSON
	// the serializer reads either: its result and its error are the caller's.
	return d.Serializer.Decode(data, defaults, nil)
}

// jsonFramer splits a JSON watch stream into its events by scanning each event's bytes
// once (strings, escapes and nesting), where the JSON framer of apimachinery decodes each
// one twice with encoding/json to find its end. A malformed event is framed all the same
// and refused by its decoder.
type jsonFramer struct {
	runtime.Framer // writes as the codec factory's framer does
}

func (jsonFramer) NewFrameReader(r io.ReadCloser) io.ReadCloser {
	return &jsonFrames{r: r, buf: make([]byte, 0, 32*1024)}
}

// jsonFrames reads one JSON value at a time from r. Read returns a whole value, or, when p
// is too small for it, a part of it and io.ErrShortBuffer, and the rest on the next calls
// (the streaming decoder then grows its buffer).
type jsonFrames struct {
	r   io.ReadCloser
	buf []byte
	// buf[start:] is read and not returned yet; scan is how far into it the current
	// value has been scanned.
	start int
	scan  valueScan
	// rest is what of the last value p had no room for.
	rest []byte
	err  error
}

func (f *jsonFrames) Read(p []byte) (int, error) {
	if len(f.rest) == 0 {
		frame, err := f.next()
		if err != nil {
			return 0, err
		}
		f.rest = frame
	}
	n := copy(p, f.rest)
	f.rest = f.rest[n:]
	if len(f.rest) > 0 {
		return n, io.ErrShortBuffer
	}
	return n, nil
}

func (f *jsonFrames) Close() error { return f.r.Close() }

// next returns the next value in the stream, which stays valid until the next call.
func (f *jsonFrames) next() ([]byte, error) {
	for {
		if begin, end, ok := f.scan.advance(f.buf[f.start:]); ok {
			frame := f.buf[f.start+begin : f.start+end]
			f.start += end
			f.scan = valueScan{}
			return frame, nil
		}
		if f.err != nil {
			if f.err == io.EOF && f.scan.started {
				return nil, io.ErrUnexpectedEOF // the stream ended inside a value
			}
			return nil, f.err // io.EOF between values; a failed read as it failed
		}
		if f.start > 0 { // keep the unreturned bytes at the front
			n := copy(f.buf, f.buf[f.start:])
			f.buf, f.start = f.buf[:n], 0
		}
		if len(f.buf) == cap(f.buf) {
			f.buf = slices.Grow(f.buf, cap(f.buf))
		}
		n, err := f.r.Read(f.buf[len(f.buf):cap(f.buf)])
		f.buf = f.buf[:len(f.buf)+n]
		f.err = err
	}
}

// valueScan finds where a JSON object or array ends, over bytes that arrive in pieces: it
// keeps its place between calls.
type valueScan struct {
	pos, begin, depth         int
	started, inString, escape bool
}

// advance scans data (all of the stream not yet returned, which grows between calls) from
// where it stopped and reports the value's bounds once it is complete. Whitespace before a
// value is skipped; what is not an object or an array is framed up to the next whitespace,
// for the decoder to refuse.
func (s *valueScan) advance(data []byte) (begin, end int, ok bool) {
	for ; s.pos < len(data); s.pos++ {
		c := data[s.pos]
		switch {
		case !s.started:
			if isSpace(c) {
				continue
			}
			s.started, s.begin = true, s.pos
			if c != '{' && c != '[' {
				s.depth = -1 // a scalar: up to the next whitespace
				continue
			}
			s.depth = 1
		case s.depth < 0:
			if isSpace(c) {
				return s.begin, s.pos, true
			}
		case s.inString:
			switch {
			case s.escape:
				s.escape = false
			case c == '\\':
				s.escape = true
			case c == '"':
				s.inString = false
			}
		case c == '"':
			s.inString = true
		case c == '{' || c == '[':
			s.depth++
		case c == '}' || c == ']':
			if s.depth--; s.depth == 0 {
				s.pos++
				return s.begin, s.pos, true
			}
		}
	}
	return 0, 0, false
}

// splitEvent reads a watch event's envelope, {"type":"...","object":{...}}, without decoding
// the object: its type and the object's bytes. ok is false for anything it does not read as
// plainly (escapes in a key or the type, malformed JSON), which the caller then decodes in
// full.
func splitEvent(data []byte) (typ string, object []byte, ok bool) {
	i := skipSpace(data, 0)
	if i == len(data) || data[i] != '{' {
		return "", nil, false
	}
	i++
	for first := true; ; first = false {
		i = skipSpace(data, i)
		if i == len(data) {
			return "", nil, false
		}
		if data[i] == '}' {
			if skipSpace(data, i+1) != len(data) {
				return "", nil, false
			}
			return typ, object, typ != "" && object != nil
		}
		if !first {
			if data[i] != ',' {
				return "", nil, false
			}
			i = skipSpace(data, i+1)
		}
		keyEnd := jsonValueEnd(data, i)
		if keyEnd < 0 || data[i] != '"' || bytes.IndexByte(data[i:keyEnd], '\\') >= 0 {
			return "", nil, false
		}
		key := data[i+1 : keyEnd-1]
		i = skipSpace(data, keyEnd)
		if i == len(data) || data[i] != ':' {
			return "", nil, false
		}
		v := skipSpace(data, i+1)
		end := jsonValueEnd(data, v)
		if end < 0 {
			return "", nil, false
		}
		switch string(key) {
		case "type":
			if data[v] != '"' || bytes.IndexByte(data[v:end], '\\') >= 0 {
				return "", nil, false
			}
			typ = string(data[v+1 : end-1])
		case "object":
			object = data[v:end]
		}
		i = end
	}
}

func skipSpace(data []byte, i int) int {
	for i < len(data) && isSpace(data[i]) {
		i++
	}
	return i
}

// isSpace reports whether c is JSON whitespace.
func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }

// jsonValueEnd returns the index just past the JSON value that starts at data[i], or -1 when
// it does not end within data. It checks structure only (strings, escapes, nesting).
func jsonValueEnd(data []byte, i int) int {
	if i >= len(data) {
		return -1
	}
	switch data[i] {
	case '"':
		for j := i + 1; j < len(data); j++ {
			switch data[j] {
			case '\\':
				j++
			case '"':
				return j + 1
			}
		}
		return -1
	case '{', '[':
		var s valueScan
		if _, end, ok := s.advance(data[i:]); ok {
			return i + end
		}
		return -1
	}
	for j := i; j < len(data); j++ { // a number, true, false or null
		if c := data[j]; c == ',' || c == '}' || c == ']' || isSpace(c) {
			return j
		}
	}
	return len(data)
}
