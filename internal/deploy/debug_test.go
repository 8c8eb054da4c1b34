package deploy

import (
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/devloop-dev/devloop/internal/digest"
)

// dlvPrefix is the command up to the program delve execs.
var dlvPrefix = []any{"/dlv", "exec", "--headless", "--listen=127.0.0.1:40000", "--only-same-user=false", "--api-version=2", "--accept-multiclient", "--continue"}

func debugCommand(program string, args ...any) []any {
	out := append(append([]any{}, dlvPrefix...), program, "--")
	return append(out, args...)
}

func TestRewriteImagesRunsDebugImagesUnderDelve(t *testing.T) {
	debugged := builtAPI
	debugged.Debug = &DebugEntrypoint{Entrypoint: []string{"/server"}, Cmd: []string{"--port=8080"}}
	cases := append(wrappedCommandCases(debugCommand),
		commandCase{"already under delve", `{name: c, image: api, command: [/dlv, exec, /server]}`, []any{"/dlv", "exec", "/server"}})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			obj := fromYAML(t, "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec:\n  template:\n    spec:\n      initContainers:\n      - {name: init, image: api}\n      containers:\n      - "+tc.container+"\n      - name: probed\n        image: api\n        livenessProbe: {httpGet: {port: 8080}}\n        readinessProbe: {httpGet: {port: 8080}}\n      - {name: other, image: nginx, livenessProbe: {tcpSocket: {port: 80}}}\n")
			_, err := RewriteImages([]*unstructured.Unstructured{obj}, []BuiltImage{debugged})
			g.Expect(err).NotTo(HaveOccurred())
			containers, _, _ := unstructured.NestedSlice(obj.Object, "spec", "template", "spec", "containers")
			c := containers[0].(map[string]any)
			g.Expect(c["image"]).To(Equal(apiDigest))
			g.Expect(c["command"]).To(Equal(tc.want))
			g.Expect(c).NotTo(HaveKey("args"))

			// A paused process fails its liveness probe: it goes, the
			// readiness probe stays.
			probed := containers[1].(map[string]any)
			g.Expect(probed).NotTo(HaveKey("livenessProbe"))
			g.Expect(probed).To(HaveKey("readinessProbe"))
			g.Expect(probed["command"]).To(Equal(debugCommand("/server", "--port=8080")))

			// Other images and init containers run as written.
			g.Expect(containers[2].(map[string]any)).To(HaveKey("livenessProbe"))
			g.Expect(containers[2].(map[string]any)).NotTo(HaveKey("command"))
			inits, _, _ := unstructured.NestedSlice(obj.Object, "spec", "template", "spec", "initContainers")
			g.Expect(inits[0].(map[string]any)["image"]).To(Equal(apiDigest))
			g.Expect(inits[0].(map[string]any)).NotTo(HaveKey("command"))

			// Rewriting the rewritten object changes nothing.
			again := obj.DeepCopy()
			_, err = RewriteImages([]*unstructured.Unstructured{again}, []BuiltImage{debugged})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(again.Object).To(Equal(obj.Object))
		})
	}
}

func TestRewriteImagesDebugWithoutProgramSaysWhy(t *testing.T) {
	g := NewWithT(t)
	debugged := builtAPI
	debugged.Debug = &DebugEntrypoint{}
	obj := fromYAML(t, deploymentWith("api"))
	_, err := RewriteImages([]*unstructured.Unstructured{obj}, []BuiltImage{debugged})
	g.Expect(err).To(MatchError(ContainSubstring("Deployment web: container c: the image is in debug mode but neither the container's command nor the image's entrypoint or cmd")))

	obj = fromYAML(t, "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n  - {name: c, image: api, command: [1]}\n")
	_, err = RewriteImages([]*unstructured.Unstructured{obj}, []BuiltImage{debugged})
	g.Expect(err).To(MatchError(ContainSubstring("Pod p: container c: command[0] is not a string")))
}

// Turning debug mode off returns to the images as pinned before, and the
// render key of a release without debug images is what it was before
// debug mode existed.
func TestDebugOffRestoresTheContainer(t *testing.T) {
	g := NewWithT(t)
	debugged := builtAPI
	debugged.Debug = &DebugEntrypoint{Entrypoint: []string{"/server"}}
	on := fromYAML(t, deploymentWith("api"))
	off := on.DeepCopy()
	_, err := RewriteImages([]*unstructured.Unstructured{on}, []BuiltImage{debugged})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = RewriteImages([]*unstructured.Unstructured{off}, []BuiltImage{builtAPI})
	g.Expect(err).NotTo(HaveOccurred())
	c, _, _ := unstructured.NestedSlice(off.Object, "spec", "template", "spec", "containers")
	g.Expect(c[0]).To(Equal(map[string]any{"name": "c", "image": apiDigest}))
	g.Expect(on.Object).NotTo(Equal(off.Object))

	g.Expect(digest.JSON([]BuiltImage{builtAPI})).To(Equal(digest.JSON([]struct {
		Name         string
		Repositories []string
		Reference    string
	}{{builtAPI.Name, builtAPI.Repositories, builtAPI.Reference}})))
	g.Expect(digest.JSON([]BuiltImage{debugged})).NotTo(Equal(digest.JSON([]BuiltImage{builtAPI})))
}
