package crd

import (
	"fmt"
	"io"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// TestKubectlExplain runs the real kubectl against the API server: the doc
// comments of the Go types must reach `kubectl explain`.
func TestKubectlExplain(t *testing.T) {
	g := NewWithT(t)
	kubectl := env.ControlPlane.KubeCtl()

	// The API server publishes a new CRD's OpenAPI a moment after it is
	// established; kubectl explain reads that document.
	out := func(args ...string) string {
		var text []byte
		g.Eventually(func() error {
			stdout, stderr, err := kubectl.Run(args...)
			if err != nil {
				errText, _ := io.ReadAll(stderr)
				return fmt.Errorf("kubectl %v: %w: %s", args, err, errText)
			}
			text, _ = io.ReadAll(stdout)
			return nil
		}, 30*time.Second, 500*time.Millisecond).Should(Succeed())
		return string(text)
	}

	images := out("explain", "devenv.spec.components.images")
	g.Expect(images).To(MatchRegexp(`KIND:\s+DevEnvironment`))
	g.Expect(images).To(ContainSubstring("assembled with go-containerregistry"))
	for _, field := range []string{"base", "run", "layers", "entrypoint", "platforms", "tags", "source"} {
		g.Expect(images).To(MatchRegexp(`(?m)^\s+`+field+`\s`), "field %s listed", field)
	}
	g.Expect(images).To(ContainSubstring("{{ .ContentHash }}"))

	tags := out("explain", "devenv.spec.components.images.tags")
	g.Expect(tags).To(MatchRegexp(`all naming the same\s+digest`))
	g.Expect(tags).To(ContainSubstring("revision tag serves pods"))

	// Every field of issue 18's real-project shapes is documented.
	fields := map[string][]string{
		"devenv.spec":                                {"chartCredentials"},
		"devenv.spec.chartCredentials":               {"urlPrefix", "secretRef"},
		"devenv.spec.sources":                        {"output"},
		"devenv.spec.sources.output":                 {"image", "name"},
		"devenv.spec.components.images.run":          {"outputs", "command", "env"},
		"devenv.spec.components.helm":                {"valuesFiles", "skipCRDs", "patches"},
		"devenv.spec.components.helm.patches":        {"patch", "target"},
		"devenv.spec.components.manifests":           {"patches"},
		"devenv.spec.components.helm.patches.target": {"kind", "name", "labelSelector"},
		"devenv.spec.components":                     {"health"},
		"devenv.spec.components.health":              {"wait", "ignore"},
		"devenv.spec.components.health.ignore":       {"kind", "group", "name"},
	}
	for path, want := range fields {
		text := out("explain", path)
		for _, field := range want {
			g.Expect(text).To(MatchRegexp(`(?m)^\s+`+field+`\s+<[^>]+>[^\n]*\n\s+\S`), "%s.%s listed with its description", path, field)
		}
	}
	g.Expect(out("explain", "devenv.spec.components.images.run.command")).To(ContainSubstring(`(image "operator").Reference`))
	g.Expect(out("explain", "devenv.spec.components.helm.imageValues.from")).To(ContainSubstring("Registry"))
}
