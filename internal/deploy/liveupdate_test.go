package deploy

import (
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/digest"
)

func supervised(program string, args ...any) []any {
	out := []any{"/.devloop/supervisor", "supervise", "--after=restart", "--", program}
	return append(out, args...)
}

var liveMount = map[string]any{"name": "devloop-live", "mountPath": "/.devloop/live"}

func TestRewriteImagesRunsLiveUpdateImagesUnderTheSupervisor(t *testing.T) {
	live := builtAPI
	live.LiveUpdate = &LiveUpdateEntrypoint{Entrypoint: []string{"/server"}, Cmd: []string{"--port=8080"}}
	cases := append(wrappedCommandCases(supervised),
		commandCase{"already supervised", `{name: c, image: api, command: [/.devloop/supervisor, supervise, --, /server]}`, []any{"/.devloop/supervisor", "supervise", "--", "/server"}})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			obj := fromYAML(t, "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec:\n  template:\n    spec:\n      securityContext: {runAsNonRoot: true}\n      volumes: [{name: data, emptyDir: {}}]\n      initContainers:\n      - {name: init, image: api}\n      containers:\n      - "+tc.container+"\n      - name: probed\n        image: api\n        volumeMounts: [{name: data, mountPath: /data}]\n        livenessProbe: {httpGet: {port: 8080}}\n        securityContext: {readOnlyRootFilesystem: true, allowPrivilegeEscalation: false}\n      - {name: other, image: nginx}\n")
			_, err := RewriteImages([]*unstructured.Unstructured{obj}, []BuiltImage{live})
			g.Expect(err).NotTo(HaveOccurred())
			spec, _, _ := unstructured.NestedMap(obj.Object, "spec", "template", "spec")
			containers := spec["containers"].([]any)
			c := containers[0].(map[string]any)
			g.Expect(c["image"]).To(Equal(apiDigest))
			g.Expect(c["command"]).To(Equal(tc.want))
			g.Expect(c).NotTo(HaveKey("args"))
			g.Expect(c["volumeMounts"]).To(Equal([]any{liveMount}))

			// Probes and the container's own mounts and security context
			// stay: the supervisor needs nothing more than the emptyDir.
			probed := containers[1].(map[string]any)
			g.Expect(probed).To(HaveKey("livenessProbe"))
			g.Expect(probed["securityContext"]).To(Equal(map[string]any{"readOnlyRootFilesystem": true, "allowPrivilegeEscalation": false}))
			g.Expect(probed["volumeMounts"]).To(Equal([]any{map[string]any{"name": "data", "mountPath": "/data"}, liveMount}))
			g.Expect(probed["command"]).To(Equal(supervised("/server", "--port=8080")))
			g.Expect(spec["volumes"]).To(Equal([]any{
				map[string]any{"name": "data", "emptyDir": map[string]any{}},
				map[string]any{"name": "devloop-live", "emptyDir": map[string]any{}},
			}))

			// Other images and init containers run as written.
			g.Expect(containers[2].(map[string]any)).NotTo(HaveKey("command"))
			g.Expect(containers[2].(map[string]any)).NotTo(HaveKey("volumeMounts"))
			// An init container of the image runs under the supervisor at
			// once: its live paths are links only the supervisor fills.
			inits := spec["initContainers"].([]any)
			g.Expect(inits[0].(map[string]any)["command"]).To(Equal([]any{"/.devloop/supervisor", "supervise", "--after=none", "--gate-timeout=1ms", "--", "/server", "--port=8080"}))
			g.Expect(inits[0].(map[string]any)["volumeMounts"]).To(Equal([]any{liveMount}))

			// The pod template is labelled, for the operator's watch.
			labels, _, _ := unstructured.NestedStringMap(obj.Object, "spec", "template", "metadata", "labels")
			g.Expect(labels).To(Equal(map[string]string{v1alpha1.LabelLiveUpdate: v1alpha1.LiveUpdateSupervised}))

			// Rewriting the rewritten object changes nothing.
			again := obj.DeepCopy()
			_, err = RewriteImages([]*unstructured.Unstructured{again}, []BuiltImage{live})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(again.Object).To(Equal(obj.Object))
		})
	}
}

// The after-action reaches the supervisor's flags; a Pod gets the volume
// too; debug mode wins over live update.
func TestLiveUpdateAfterCommandAndDebug(t *testing.T) {
	g := NewWithT(t)
	live := builtAPI
	live.LiveUpdate = &LiveUpdateEntrypoint{Entrypoint: []string{"/app"}, After: "Command", Command: []string{"/app", "reload"}}
	obj := fromYAML(t, "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n  - {name: c, image: api}\n")
	_, err := RewriteImages([]*unstructured.Unstructured{obj}, []BuiltImage{live})
	g.Expect(err).NotTo(HaveOccurred())
	c, _, _ := unstructured.NestedSlice(obj.Object, "spec", "containers")
	g.Expect(c[0].(map[string]any)["command"]).To(Equal([]any{"/.devloop/supervisor", "supervise", "--after=command", `--after-command=["/app","reload"]`, "--", "/app"}))
	v, _, _ := unstructured.NestedSlice(obj.Object, "spec", "volumes")
	g.Expect(v).To(HaveLen(1))
	g.Expect(obj.GetLabels()).To(Equal(map[string]string{v1alpha1.LabelLiveUpdate: v1alpha1.LiveUpdateSupervised}), "a Pod is its own template")

	cron := fromYAML(t, "apiVersion: batch/v1\nkind: CronJob\nmetadata: {name: c}\nspec:\n  jobTemplate:\n    spec:\n      template:\n        metadata: {labels: {app: c}}\n        spec:\n          containers:\n          - {name: c, image: api}\n")
	_, err = RewriteImages([]*unstructured.Unstructured{cron}, []BuiltImage{live})
	g.Expect(err).NotTo(HaveOccurred())
	labels, _, _ := unstructured.NestedStringMap(cron.Object, "spec", "jobTemplate", "spec", "template", "metadata", "labels")
	g.Expect(labels).To(Equal(map[string]string{"app": "c", v1alpha1.LabelLiveUpdate: v1alpha1.LiveUpdateSupervised}), "the template's own labels are kept")

	none := builtAPI
	none.LiveUpdate = &LiveUpdateEntrypoint{Entrypoint: []string{"/app"}, After: "None"}
	obj = fromYAML(t, deploymentWith("api"))
	_, err = RewriteImages([]*unstructured.Unstructured{obj}, []BuiltImage{none})
	g.Expect(err).NotTo(HaveOccurred())
	c, _, _ = unstructured.NestedSlice(obj.Object, "spec", "template", "spec", "containers")
	g.Expect(c[0].(map[string]any)["command"]).To(Equal([]any{"/.devloop/supervisor", "supervise", "--after=none", "--", "/app"}))

	both := live
	both.Debug = &DebugEntrypoint{Entrypoint: []string{"/app"}}
	obj = fromYAML(t, deploymentWith("api"))
	_, err = RewriteImages([]*unstructured.Unstructured{obj}, []BuiltImage{both})
	g.Expect(err).NotTo(HaveOccurred())
	c, _, _ = unstructured.NestedSlice(obj.Object, "spec", "template", "spec", "containers")
	g.Expect(c[0].(map[string]any)["command"]).To(Equal(debugCommand("/app")))
	g.Expect(c[0].(map[string]any)).NotTo(HaveKey("volumeMounts"))
	_, found, _ := unstructured.NestedStringMap(obj.Object, "spec", "template", "metadata", "labels")
	g.Expect(found).To(BeFalse(), "a debug pod runs no supervisor: not labelled")
}

func TestLiveUpdateWithoutProgramSaysWhy(t *testing.T) {
	g := NewWithT(t)
	live := builtAPI
	live.LiveUpdate = &LiveUpdateEntrypoint{}
	obj := fromYAML(t, deploymentWith("api"))
	_, err := RewriteImages([]*unstructured.Unstructured{obj}, []BuiltImage{live})
	g.Expect(err).To(MatchError(ContainSubstring("Deployment web: container c: the image has liveUpdate but neither the container's command nor the image's entrypoint or cmd (images[].entrypoint, images[].cmd) says what program the supervisor runs")))
}

// Without liveUpdate the render key is what it was before live update
// existed, so turning it on or off re-renders and nothing else does.
func TestLiveUpdateRenderKey(t *testing.T) {
	g := NewWithT(t)
	live := builtAPI
	live.LiveUpdate = &LiveUpdateEntrypoint{Entrypoint: []string{"/server"}}
	g.Expect(digest.JSON([]BuiltImage{builtAPI})).To(Equal(digest.JSON([]struct {
		Name         string
		Repositories []string
		Reference    string
	}{{builtAPI.Name, builtAPI.Repositories, builtAPI.Reference}})))
	g.Expect(digest.JSON([]BuiltImage{live})).NotTo(Equal(digest.JSON([]BuiltImage{builtAPI})))
}
