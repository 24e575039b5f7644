package messages

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestGeneratedCodeIsFresh regenerates the .pb.go files into a temporary
// directory and fails if the committed ones differ: run `make proto`.
func TestGeneratedCodeIsFresh(t *testing.T) {
	if _, err := exec.LookPath("protoc"); err != nil {
		t.Fatal("protoc is not installed: `make tools` installs Debian's protobuf-compiler")
	}
	dir := t.TempDir()
	out, err := exec.Command("sh", "../scripts/protogen.sh", dir).CombinedOutput()
	if err != nil {
		t.Fatalf("protogen: %v\n%s", err, out)
	}
	gen, _ := filepath.Glob(filepath.Join(dir, "*.pb.go"))
	committed, _ := filepath.Glob("*.pb.go")
	if len(gen) == 0 || len(gen) != len(committed) {
		t.Fatalf("generated %d files, %d committed", len(gen), len(committed))
	}
	for _, g := range gen {
		want, _ := os.ReadFile(g)
		got, err := os.ReadFile(filepath.Base(g))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s is stale: run `make proto`", filepath.Base(g))
		}
	}
}
