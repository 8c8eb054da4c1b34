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

}
