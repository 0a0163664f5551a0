package sdk

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// Labels the stand-in reads from a pod when it answers.
const (
	labelSandboxNameHash = "agents.x-k8s.io/sandbox-name-hash"
	labelClaimUID        = "agents.x-k8s.io/claim-uid"
	agentsWarmPoolLabel  = "agents.x-k8s.io/warm-pool-sandbox"
)

// Reply is what the stand-in puts in an execute call's stdout: which pod answered and which
// claim that pod carried at the moment it answered. A test compares it with its own claim.
type Reply struct {
	Namespace string `json:"namespace"`
	Pod       string `json:"pod"`
	PodIP     string `json:"podIP"`
	ClaimUID  string `json:"claimUID"`
	Command   string `json:"command"`
}

// Request is one request the stand-in served, for a test to check afterwards.
type Request struct {
	Namespace, Pod, ClaimUID string
	Method, Path             string
	// SandboxID is the X-Sandbox-Id header the router passed on: the name it routed by.
	SandboxID string
}

// Runtime stands in for the container of every sandbox pod of the local control plane whose
// IP it can listen on: for each Ready pod labelled agents.x-k8s.io/sandbox-name-hash with an
// IP in a loopback range, it listens on <pod IP>:Port and answers the runtime endpoints the
// public SDK calls through the sandbox-router — POST /execute, POST /upload, GET
// /download/<path>, GET /list/<path>, GET /exists/<path> — with replies that name the pod and
// the claim UID the pod's labels hold when the request arrives (read from the API server). It
// executes nothing: execute returns a Reply as JSON in stdout, and files live in memory, per
// pod.
type Runtime struct {
	// Port is the container port the SDK and the router address (X-Sandbox-Port).
	Port int

	pods cache.SharedIndexInformer
	cs   kubernetes.Interface

	mu       sync.Mutex
	servers  map[string]*podServer // by pod UID
	byIP     map[string]*podServer // the server listening on each IP
	requests []Request
	// routes is each pod's route labels in every state its watch delivered, by namespace/name:
	// what a failed request is explained by.
	routes map[string][]string
}

type podServer struct {
	ip     string
	ln     net.Listener
	srv    *http.Server
	mu     sync.Mutex
	files  map[string][]byte
	uid    string
	name   string
	lookup func() (*corev1.Pod, bool)
	// sharing are the other live pods kwok gave this server's IP (by name), which its
	// listener answers for: kwok's pod IP pool has handed one address to two live pods (seen
	// once in the SDK suite, three pods on 127.16.0.1). A request the router sent to this IP
	// for one of them (X-Sandbox-Id) is that pod's; any other is this server's pod's, so that
	// a request routed to the wrong IP still reaches the wrong pod and fails its test.
	sharing map[string]*podServer
}

// serverFor is the pod a request to s is for: the pod sharing s's IP that the router named,
// else s's own.
func (s *podServer) serverFor(req *http.Request) *podServer {
	s.mu.Lock()
	defer s.mu.Unlock()
	if o := s.sharing[req.Header.Get("X-Sandbox-Id")]; o != nil {
		return o
	}
	return s
}

// StartRuntime starts the stand-in, watching pods through cs, until ctx ends.
func StartRuntime(ctx context.Context, cs kubernetes.Interface, port int) (*Runtime, error) {
	factory := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.LabelSelector = labelSandboxNameHash
	}))
	r := &Runtime{Port: port, pods: factory.Core().V1().Pods().Informer(), cs: cs, servers: map[string]*podServer{}, byIP: map[string]*podServer{},
		routes: map[string][]string{}}
	if _, err := r.pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { r.sync(obj) },
		UpdateFunc: func(_, obj any) { r.sync(obj) },
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if pod, ok := obj.(*corev1.Pod); ok {
				r.stop(string(pod.UID))
			}
		},
	}); err != nil {
		return nil, err
	}
	go r.pods.Run(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), r.pods.HasSynced) {
		return nil, errors.New("runtime stand-in: pod cache did not sync")
	}
	go func() {
		<-ctx.Done()
		r.mu.Lock()
		defer r.mu.Unlock()
		for uid, s := range r.servers {
			_ = s.srv.Close()
			delete(r.servers, uid)
		}
	}()
	return r, nil
}

// Requests returns the requests served so far.
func (r *Runtime) Requests() []Request {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Request(nil), r.requests...)
}

// Listening says whether the stand-in serves the pod with this UID.
func (r *Runtime) Listening(uid string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.servers[uid] != nil
}

// RouteHistory is every state of the pod's route labels (claim-uid, warm-pool) the stand-in's
// pod watch delivered, oldest first, each with its resourceVersion and when it arrived.
func (r *Runtime) RouteHistory(namespace, name string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.routes[namespace+"/"+name]...)
}

func (r *Runtime) recordRoute(pod *corev1.Pod) {
	_, warm := pod.Labels[agentsWarmPoolLabel]
	state := fmt.Sprintf("rv %s: claim-uid %q, warm-pool label %v", pod.ResourceVersion, pod.Labels[labelClaimUID], warm)
	key := pod.Namespace + "/" + pod.Name
	r.mu.Lock()
	defer r.mu.Unlock()
	h := r.routes[key]
	if n := len(h); n > 0 && strings.HasPrefix(h[n-1], state) {
		return
	}
	r.routes[key] = append(h, state+" (seen "+time.Now().Format("15:04:05.000")+")")
}

// sync serves a Ready sandbox pod on its IP, and stops serving one that is not Ready.
func (r *Runtime) sync(obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	r.recordRoute(pod)
	uid := string(pod.UID)
	ip := net.ParseIP(pod.Status.PodIP)
	if ip == nil || !ip.IsLoopback() || !podReady(pod) || pod.DeletionTimestamp != nil {
		r.stop(uid)
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if s := r.servers[uid]; s != nil && s.ip == pod.Status.PodIP {
		return
	}
	ns, name := pod.Namespace, pod.Name
	s := &podServer{ip: pod.Status.PodIP, files: map[string][]byte{}, uid: uid, name: name, lookup: func() (*corev1.Pod, bool) {
		// The pod as the API server has it when the request arrives, not as this informer
		// last saw it: a client that saw its claim Ready must find every write made before
		// that Ready, and an informer a few events behind would report a route write as
		// missing that the API server holds (or hide one that was undone).
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		p, err := r.cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		return p, err == nil && string(p.UID) == uid
	}}
	if owner := r.byIP[s.ip]; owner != nil {
		// Served and Ready as far as this watch knows (stop removes it otherwise).
		owner.mu.Lock()
		owner.sharing[name] = s
		owner.mu.Unlock()
		r.servers[uid] = s
		fmt.Printf("runtime stand-in: kwok gave pod %s/%s the IP %s of live pod %s too; its listener answers for both\n", ns, name, s.ip, owner.name)
		return
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(s.ip, strconv.Itoa(r.Port)))
	if err != nil {
		// Another pod held this IP and its server has not stopped yet: the next update
		// of this pod tries again.
		return
	}
	s.ln, s.sharing = ln, map[string]*podServer{}
	s.srv = &http.Server{Handler: r.handler(s), ReadHeaderTimeout: 10 * time.Second}
	r.servers[uid], r.byIP[s.ip] = s, s
	go func() { _ = s.srv.Serve(ln) }()
}

// stop stops serving the pod with this UID: a pod sharing another's listener leaves it; a
// listener's own pod closes it, and the pods sharing it are served again at once, as their
// watch last showed them.
func (r *Runtime) stop(uid string) {
	r.mu.Lock()
	s := r.servers[uid]
	delete(r.servers, uid)
	if s != nil && s.srv == nil {
		if owner := r.byIP[s.ip]; owner != nil {
			owner.mu.Lock()
			delete(owner.sharing, s.name)
			owner.mu.Unlock()
		}
		r.mu.Unlock()
		return
	}
	var again []*podServer
	if s != nil && r.byIP[s.ip] == s {
		delete(r.byIP, s.ip)
		s.mu.Lock()
		for _, o := range s.sharing {
			delete(r.servers, o.uid)
			again = append(again, o)
		}
		s.mu.Unlock()
	}
	r.mu.Unlock()
	if s != nil {
		_ = s.srv.Close()
	}
	for _, o := range again {
		if pod, ok := o.lookup(); ok {
			r.sync(pod)
		}
	}
}

func podReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// handler answers the runtime endpoints for one pod. It routes on the raw path itself: a
// ServeMux would answer the SDK's "/list/." with a redirect to the cleaned path.
func (r *Runtime) handler(listener *podServer) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method == http.MethodGet && req.URL.Path == "/" {
			writeJSON(w, map[string]string{"status": "ok"})
			return
		}
		s := listener.serverFor(req)
		pod, ok := s.lookup()
		if !ok {
			http.Error(w, `{"detail":"pod gone"}`, http.StatusGone)
			return
		}
		r.mu.Lock()
		r.requests = append(r.requests, Request{
			Namespace: pod.Namespace, Pod: pod.Name, ClaimUID: pod.Labels[labelClaimUID],
			Method: req.Method, Path: req.URL.Path, SandboxID: req.Header.Get("X-Sandbox-Id"),
		})
		r.mu.Unlock()
		endpoint, rest, _ := strings.Cut(strings.TrimPrefix(req.URL.Path, "/"), "/")
		file := path.Clean("/" + rest)
		switch {
		case req.Method == http.MethodPost && endpoint == "execute" && rest == "":
			s.execute(w, req, pod)
		case req.Method == http.MethodPost && endpoint == "upload" && rest == "":
			s.upload(w, req)
		case req.Method == http.MethodGet && endpoint == "download":
			s.download(w, file)
		case req.Method == http.MethodGet && endpoint == "list":
			s.list(w, file)
		case req.Method == http.MethodGet && endpoint == "exists":
			s.exists(w, file)
		default:
			http.Error(w, `{"detail":"Not Found"}`, http.StatusNotFound)
		}
	})
}

func (s *podServer) execute(w http.ResponseWriter, req *http.Request, pod *corev1.Pod) {
	var in struct {
		Command string `json:"command"`
	}
	if err := json.NewDecoder(io.LimitReader(req.Body, 1<<20)).Decode(&in); err != nil {
		http.Error(w, `{"detail":"bad request"}`, http.StatusBadRequest)
		return
	}
	out, _ := json.Marshal(Reply{Namespace: pod.Namespace, Pod: pod.Name, PodIP: s.ip, ClaimUID: pod.Labels[labelClaimUID], Command: in.Command})
	writeJSON(w, map[string]any{"stdout": string(out), "stderr": "", "exit_code": 0})
}

func (s *podServer) upload(w http.ResponseWriter, req *http.Request) {
	f, hdr, err := req.FormFile("file")
	if err != nil {
		http.Error(w, `{"detail":"no file"}`, http.StatusBadRequest)
		return
	}
	defer func() { _ = f.Close() }()
	data, err := io.ReadAll(io.LimitReader(f, 64<<20))
	if err != nil {
		http.Error(w, `{"detail":"read failed"}`, http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	s.files[path.Clean("/"+hdr.Filename)] = data
	s.mu.Unlock()
	writeJSON(w, map[string]string{"message": fmt.Sprintf("File '%s' uploaded successfully", hdr.Filename)})
}

func (s *podServer) download(w http.ResponseWriter, file string) {
	s.mu.Lock()
	data, ok := s.files[file]
	s.mu.Unlock()
	if !ok {
		http.Error(w, `{"detail":"File not found"}`, http.StatusNotFound)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	_, _ = w.Write(data)
}

func (s *podServer) list(w http.ResponseWriter, dir string) {
	type entry struct {
		Name    string  `json:"name"`
		Size    int64   `json:"size"`
		Type    string  `json:"type"`
		ModTime float64 `json:"mod_time"`
	}
	entries := []entry{}
	s.mu.Lock()
	for p, data := range s.files {
		if path.Dir(p) == dir {
			entries = append(entries, entry{Name: path.Base(p), Size: int64(len(data)), Type: "file"})
		}
	}
	s.mu.Unlock()
	sort.Slice(entries, func(i, j int) bool { return entries[i].Name < entries[j].Name })
	writeJSON(w, entries)
}

func (s *podServer) exists(w http.ResponseWriter, p string) {
	s.mu.Lock()
	_, ok := s.files[p]
	for f := range s.files {
		ok = ok || p == "/" || strings.HasPrefix(f, p+"/")
	}
	s.mu.Unlock()
	writeJSON(w, map[string]any{"path": p, "exists": ok})
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}
