package bench

import (
	"context"
	"errors"
	"io"

	"github.com/sandgate-dev/sandgate/test/bench/report"
)

// runScale measures the operator at 20,000 Sandboxes (not built yet).
func runScale(ctx context.Context, o Options, sc scenario, stdout, stderr io.Writer) (*report.Result, []string, error) {
	return nil, []string{sc.name + ": " + errors.New("not built").Error()}, nil
}
