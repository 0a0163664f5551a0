package controlplane

import (
	"context"
	"strings"
	"testing"
)

func TestMissingBinariesTellToRunMakeTools(t *testing.T) {
	_, err := Start(context.Background(), Options{BinaryDir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "make tools") {
		t.Fatalf("Start without binaries: got %v, want an error that says to run make tools", err)
	}
}
