package manifests

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sftpgate/sftpgate/hack/repo"
)

// TestDockerfile: no Docker engine runs here, so the Dockerfile is read:
// a Go 1.26 builder, a static build, the distroless non-root base, the one
// binary as entrypoint.
func TestDockerfile(t *testing.T) {
	root, err := repo.Root()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(root, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	// Join continued lines; comments match no instruction.
	text := strings.ReplaceAll(string(raw), "\\\n", " ")
	var from []string
	var user, entrypoint, build string
	for line := range strings.SplitSeq(text, "\n") {
		line = strings.TrimSpace(line)
		instruction, rest, _ := strings.Cut(line, " ")
		switch strings.ToUpper(instruction) {
		case "FROM":
			from = append(from, strings.Fields(rest)[0])
		case "USER":
			user = rest
		case "ENTRYPOINT":
			entrypoint = rest
		case "RUN":
			if strings.Contains(rest, "go build") {
				build = rest
			}
		}
	}
	if len(from) != 2 || !strings.HasPrefix(from[0], "golang:1.26") || from[1] != "gcr.io/distroless/static-debian12:nonroot" {
		t.Errorf("stages: %v; want a golang:1.26 builder and gcr.io/distroless/static-debian12:nonroot", from)
	}
	if user != "65532:65532" {
		t.Errorf("USER %q; want the non-root 65532:65532", user)
	}
	if entrypoint != `["/sftpgate"]` {
		t.Errorf("ENTRYPOINT %s; want [\"/sftpgate\"]: the Deployments choose the subcommand by args", entrypoint)
	}
	for _, want := range []string{"CGO_ENABLED=0", "-trimpath", "--mount=type=cache"} {
		if !strings.Contains(build, want) {
			t.Errorf("the go build step lacks %s: %s", want, build)
		}
	}
}
