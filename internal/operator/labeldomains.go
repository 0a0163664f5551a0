package operator

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/sandgate-dev/sandgate/api/policy"
)

// The claim label allowlist is configured as the public controller's is: the file
// allowed-label-domains of the ConfigMap agent-sandbox-config in the operator's namespace
// (the public controller mounts it at /etc/sandbox-config, optional, and reads it once at
// start). sandgate watches that one ConfigMap through the manager's cache instead: a change
// applies to the next claim without a restart, and admission reads the list from memory.
const (
	// ConfigMapName is the ConfigMap of the public controller's settings.
	ConfigMapName = "agent-sandbox-config"
	// AllowedLabelDomainsKey is its file of label domains claims may use: entries separated
	// by commas or line breaks (policy.ParseLabelDomains). Missing or empty means
	// policy.DefaultClaimLabelDomains.
	AllowedLabelDomainsKey = "allowed-label-domains"
	// DefaultConfigNamespace is where ConfigMapName is read when neither
	// Options.ConfigNamespace nor the pod's namespace says: the install's namespace.
	DefaultConfigNamespace = "sandgate-system"
)

// serviceAccountNamespaceFile holds the pod's namespace in a cluster.
const serviceAccountNamespaceFile = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// configNamespace is the namespace of ConfigMapName: set, else the pod's (POD_NAMESPACE, which
// the install sets, or the service account's), else DefaultConfigNamespace.
func configNamespace(set string) string {
	if set != "" {
		return set
	}
	if ns := os.Getenv("POD_NAMESPACE"); ns != "" {
		return ns
	}
	if b, err := os.ReadFile(serviceAccountNamespaceFile); err == nil {
		if ns := strings.TrimSpace(string(b)); ns != "" {
			return ns
		}
	}
	return DefaultConfigNamespace
}

// configMapCache restricts the manager's ConfigMap informer to ConfigMapName in ns: the
// operator reads no other ConfigMap, and caches none.
func configMapCache(o *cache.Options, ns string) {
	if o.ByObject == nil {
		o.ByObject = map[client.Object]cache.ByObject{}
	}
	o.ByObject[&corev1.ConfigMap{}] = cache.ByObject{Namespaces: map[string]cache.Config{
		ns: {FieldSelector: fields.OneTermEqualSelector("metadata.name", ConfigMapName)},
	}}
}

// watchLabelDomains keeps l in step with the ConfigMap in ns from the manager's informer,
// telling changed after each change (without blocking: one pending event stands for any
// number of changes, the claim controller reads the list when it handles it), and holds
// readiness until the informer has listed it, so that no claim is admitted against the
// default list while a configured one is on its way.
func (o *Operator) watchLabelDomains(ctx context.Context, ns string, l *policy.LabelDomains, changed chan<- event.GenericEvent) error {
	inf, err := o.GetCache().GetInformer(ctx, &corev1.ConfigMap{}, cache.BlockUntilSynced(false))
	if err != nil {
		return fmt.Errorf("watching ConfigMap %s/%s: %w", ns, ConfigMapName, err)
	}
	log := o.GetLogger().WithName("label-domains").WithValues("configMap", ns+"/"+ConfigMapName)
	// apply sets l from the ConfigMap obj when it is ours (a deleted one, or one without the
	// file, is the default list), and tells changed.
	apply := func(obj any, deleted bool) {
		if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		cm, ok := obj.(*corev1.ConfigMap)
		if !ok || cm.Namespace != ns || cm.Name != ConfigMapName {
			return
		}
		var domains []string
		if !deleted {
			domains = policy.ParseLabelDomains(labelDomainsFile(cm))
		}
		l.Set(domains)
		log.Info("claim label domains", "allowed", l.Get())
		select {
		case changed <- event.GenericEvent{Object: cm}:
		default:
		}
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { apply(obj, false) },
		UpdateFunc: func(_, obj any) { apply(obj, false) },
		DeleteFunc: func(obj any) { apply(obj, true) },
	}); err != nil {
		return fmt.Errorf("watching ConfigMap %s/%s: %w", ns, ConfigMapName, err)
	}
	return o.addReadyzCheck("label-domains", func(*http.Request) error {
		if !inf.HasSynced() {
			return errors.New("the claim label allowlist (ConfigMap " + ns + "/" + ConfigMapName + ") is not read yet")
		}
		return nil
	})
}

// labelDomainsFile is the allowed-label-domains file of cm, as the public controller's pod
// sees it mounted: from data, else binaryData.
func labelDomainsFile(cm *corev1.ConfigMap) string {
	if file, ok := cm.Data[AllowedLabelDomainsKey]; ok {
		return file
	}
	return string(cm.BinaryData[AllowedLabelDomainsKey])
}
