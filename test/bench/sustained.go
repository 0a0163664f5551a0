package bench

import (
	"context"
	"errors"
	"io"

	"github.com/sandgate-dev/sandgate/test/bench/report"
)

// runSustained measures a steady claim rate against its floor (not built yet).
func runSustained(ctx context.Context, o Options, sc scenario, stdout, stderr io.Writer) (*report.Result, []string, error) {
	return nil, []string{sc.name + ": " + errors.New("not built").Error()}, nil
}
