package main

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/electd/electd/internal/teststore"
)

// The anchors' libraries are the bench's business: none of them may end up
// in the product binary.
func TestProductBinaryLeavesAnchorsOut(t *testing.T) {
	root, err := teststore.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "list", "-deps", "./cmd/electd")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		msg := ""
		if ee, ok := err.(*exec.ExitError); ok {
			msg = string(ee.Stderr)
		}
		t.Fatalf("go list -deps ./cmd/electd: %v\n%s", err, msg)
	}
	forbidden := func(pkg string) bool {
		return pkg == "github.com/go-redsync/redsync" || strings.HasPrefix(pkg, "github.com/go-redsync/redsync/") ||
			pkg == "go.etcd.io/etcd/client/v3/concurrency" || strings.HasPrefix(pkg, "go.etcd.io/etcd/client/v3/concurrency/") ||
			strings.HasPrefix(pkg, "k8s.io/") || strings.HasPrefix(pkg, "sigs.k8s.io/")
	}
	n := 0
	for _, pkg := range strings.Fields(string(out)) {
		n++
		if forbidden(pkg) {
			t.Errorf("./cmd/electd depends on %s: the bench's anchor libraries must stay out of the product binary", pkg)
		}
	}
	if n < 10 {
		t.Fatalf("go list -deps ./cmd/electd listed %d packages; that cannot be the whole binary", n)
	}
}
