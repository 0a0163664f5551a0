package demo

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sandgate-dev/sandgate/api"
	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
)

// newClient is a client of the demo's cluster that reads and watches every kind sandgate
// serves.
func newClient(cfg *rest.Config) (client.WithWatch, error) {
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: api.NewScheme()})
	if err != nil {
		return nil, fmt.Errorf("creating client: %w", err)
	}
	return c, nil
}

// readyClaim is what the demo saw of a claim when it first showed Ready=True.
type readyClaim struct {
	sandbox, stamp string
	// latency runs from the create call to the watch event that showed Ready=True: what a
	// client that creates a claim and waits for it experiences.
	latency time.Duration
}

// createAndWait creates claim and waits, on a watch of that claim opened before the create,
// until it is Ready=True.
func createAndWait(ctx context.Context, c client.WithWatch, claim *extv1beta1.SandboxClaim) (readyClaim, error) {
	ctx, cancel := context.WithTimeout(ctx, claimWait)
	defer cancel()
	w, err := c.Watch(ctx, &extv1beta1.SandboxClaimList{}, &client.ListOptions{
		Namespace:     claim.Namespace,
		FieldSelector: fields.OneTermEqualSelector("metadata.name", claim.Name),
	})
	if err != nil {
		return readyClaim{}, fmt.Errorf("watching claim %s: %w", claim.Name, err)
	}
	defer w.Stop()
	start := time.Now()
	if err := c.Create(ctx, claim); err != nil {
		return readyClaim{}, fmt.Errorf("creating claim %s: %w", claim.Name, err)
	}
	for {
		select {
		case <-ctx.Done():
			return readyClaim{}, fmt.Errorf("claim %s not Ready within %s", claim.Name, claimWait)
		case ev, ok := <-w.ResultChan():
			if !ok {
				return readyClaim{}, fmt.Errorf("the watch of claim %s ended before it was Ready", claim.Name)
			}
			got, isClaim := ev.Object.(*extv1beta1.SandboxClaim)
			if (ev.Type != watch.Added && ev.Type != watch.Modified) || !isClaim ||
				!meta.IsStatusConditionTrue(got.Status.Conditions, agentsv1beta1.ConditionReady) {
				continue
			}
			return readyClaim{
				sandbox: got.Status.Sandbox.Name,
				stamp:   got.Annotations[agentsv1beta1.AnnotationSandboxTemplateHash],
				latency: time.Since(start),
			}, nil
		}
	}
}
