package operator

import (
	"context"
	"fmt"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/sandgate-dev/sandgate/internal/tracing"
)

// traceFlushTimeout bounds the export of the last spans on shutdown.
const traceFlushTimeout = 5 * time.Second

// newTracer is the operator's tracer: Options.TracerProvider's, else with EnableTracing the
// OTLP exporter's (tracing.Setup), else nil (off, at no cost). For the exporter it returns a
// runnable that flushes and stops it when the manager stops.
func newTracer(ctx context.Context, opts Options) (*tracing.Tracer, manager.Runnable, error) {
	if opts.TracerProvider != nil {
		return tracing.New(opts.TracerProvider), nil, nil
	}
	if !opts.EnableTracing {
		return nil, nil, nil
	}
	tp, err := tracing.Setup(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("setting up tracing: %w", err)
	}
	return tracing.New(tp), traceFlusher{shutdown: tp.Shutdown}, nil
}

// traceFlusher stops the exporter, sending what it holds, when the manager stops. It runs on
// every replica, leader or not: the webhooks trace on all of them.
type traceFlusher struct {
	shutdown func(context.Context) error
}

var _ manager.LeaderElectionRunnable = traceFlusher{}

func (f traceFlusher) Start(ctx context.Context) error {
	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.Background(), traceFlushTimeout)
	defer cancel()
	return f.shutdown(sctx)
}

func (traceFlusher) NeedLeaderElection() bool { return false }
