package deploy

import (
	"fmt"
	"slices"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/fault"
)

// BuiltImage is an image the environment built, as deployed objects should
// run it.
type BuiltImage struct {
	// Name of the image in the spec (images[].name).
	Name string
	// Repositories are the names under which charts and manifests may refer
	// to the image: the push repository, the pull repository and the bare
	// image name. A reference matches when its repository, normalized or as
	// written, equals one of them.
	Repositories []string
	// Reference is the digest-pinned pull reference that replaces a match,
	// e.g. host:5000/team/api@sha256:....
	Reference string
	// Debug is set when the image is in debug mode (a debug build with
	// delve): the containers running it start under delve (debugContainer).
	// Omitted from JSON when nil, so a Helm release's render key is what
	// it was before debug mode existed.
	Debug *DebugEntrypoint `json:",omitempty"`
	// LiveUpdate is set for an image with images[].liveUpdate: the
	// containers running it start under the live update supervisor
	// (liveUpdateContainer), unless it is in debug mode. Omitted from JSON
	// when nil, like Debug.
	LiveUpdate *LiveUpdateEntrypoint `json:",omitempty"`
}

// podSpecPaths are where each workload kind keeps its pod spec. Kinds are
// matched on kind alone: apps/v1 and extensions/v1beta1 Deployments, and
// batch/v1 and v1beta1 CronJobs, nest the same way.
var podSpecPaths = map[string][]string{
	"Pod":                   {"spec"},
	"Deployment":            {"spec", "template", "spec"},
	"StatefulSet":           {"spec", "template", "spec"},
	"DaemonSet":             {"spec", "template", "spec"},
	"ReplicaSet":            {"spec", "template", "spec"},
	"ReplicationController": {"spec", "template", "spec"},
	"Job":                   {"spec", "template", "spec"},
	"CronJob":               {"spec", "jobTemplate", "spec", "template", "spec"},
}

var containerFields = []string{"initContainers", "containers", "ephemeralContainers"}

// RewriteImages replaces, in place, every container image of the workloads
// in objs whose repository is one of a built image's Repositories with that
// image's digest-pinned Reference, so that what runs is exactly what was
// built (a tag may move; a digest cannot). It returns how many container
// images were rewritten. Images that match nothing are left as written.
// The containers (not init or ephemeral containers) of an image in debug
// mode also get their command rewritten to run under delve.
func RewriteImages(objs []*unstructured.Unstructured, images []BuiltImage) (int, error) {
	index, err := repositoryIndex(images)
	if err != nil {
		return 0, err
	}
	rewritten := 0
	for _, obj := range objs {
		path, ok := podSpecPaths[obj.GetKind()]
		if !ok {
			continue
		}
		spec, found, err := unstructured.NestedMap(obj.Object, path...)
		if err != nil {
			return rewritten, fault.Permanentf("%s %s: %s is not an object: %v", obj.GetKind(), obj.GetName(), strings.Join(path, "."), err)
		}
		if !found {
			continue
		}
		if err := refuseDebugOnHostNetwork(spec, index, strings.Join(path, ".")); err != nil {
			return rewritten, fault.Permanentf("%s %s: %v", obj.GetKind(), obj.GetName(), err)
		}
		n, wrapped, err := rewriteContainers(spec, index)
		if err != nil {
			return rewritten, fault.Permanentf("%s %s: %v", obj.GetKind(), obj.GetName(), err)
		}
		if n == 0 && !wrapped {
			continue
		}
		if err := unstructured.SetNestedMap(obj.Object, spec, path...); err != nil {
			return rewritten, err
		}
		if wrapped {
			if err := labelSupervised(obj, path); err != nil {
				return rewritten, fault.Permanentf("%s %s: %v", obj.GetKind(), obj.GetName(), err)
			}
		}
		rewritten += n
	}
	return rewritten, nil
}

// rewriteContainers rewrites the images of one pod spec, and says whether
// it also wrapped containers of live-updatable images (their pod then
// gets the live root's volume).
func rewriteContainers(spec map[string]any, index map[string]*BuiltImage) (int, bool, error) {
	n := 0
	live := false
	for _, field := range containerFields {
		list, ok := spec[field]
		if !ok || list == nil {
			continue
		}
		containers, ok := list.([]any)
		if !ok {
			return n, false, fmt.Errorf("%s is not a list", field)
		}
		for _, item := range containers {
			c, ok := item.(map[string]any)
			if !ok {
				return n, false, fmt.Errorf("%s holds a non-object", field)
			}
			image, _ := c["image"].(string)
			img, ok := lookupImage(index, image)
			if !ok {
				continue
			}
			if img.Reference != image {
				c["image"] = img.Reference
				n++
			}
			switch {
			case field == "initContainers" && img.Debug == nil && img.LiveUpdate != nil:
				if err := liveUpdateInitContainer(c, img.LiveUpdate); err != nil {
					return n, false, err
				}
				live = true
			case field != "containers":
			case img.Debug != nil:
				if err := debugContainer(c, img.Debug); err != nil {
					return n, false, err
				}
			case img.LiveUpdate != nil:
				if err := liveUpdateContainer(c, img.LiveUpdate); err != nil {
					return n, false, err
				}
				live = true
			}
		}
	}
	if live {
		if err := addLiveVolume(spec); err != nil {
			return n, false, err
		}
	}
	return n, live, nil
}

// repositoryIndex maps every spelling of every built image's repositories
// to the image.
func repositoryIndex(images []BuiltImage) (map[string]*BuiltImage, error) {
	index := map[string]*BuiltImage{}
	for i := range images {
		img := &images[i]
		if _, err := name.NewDigest(img.Reference, name.WeakValidation); err != nil {
			return nil, fault.Permanentf("image %s: reference %q is not digest-pinned: %v", img.Name, img.Reference, err)
		}
		for _, repo := range img.Repositories {
			for _, key := range repositoryKeys(repo) {
				index[key] = img
			}
		}
	}
	return index, nil
}

// lookupImage finds the built image for an image as written in a manifest.
func lookupImage(index map[string]*BuiltImage, image string) (*BuiltImage, bool) {
	if image == "" {
		return nil, false
	}
	for _, key := range repositoryKeys(image) {
		if img, ok := index[key]; ok {
			return img, true
		}
	}
	return nil, false
}

// repositoryKeys are the spellings a reference is compared on: the
// repository as written without tag or digest, and its normalized name
// (nginx -> index.docker.io/library/nginx). An unparsable reference, such
// as a template placeholder, is compared as written only.
func repositoryKeys(s string) []string {
	bare := stripTagAndDigest(s)
	keys := []string{bare}
	if ref, err := name.ParseReference(s, name.WeakValidation); err == nil {
		if n := ref.Context().Name(); n != bare {
			keys = append(keys, n)
		}
	}
	return keys
}

// stripTagAndDigest drops "@digest" and a ":tag" after the last slash (a
// colon before it is a registry port).
func stripTagAndDigest(s string) string {
	if i := strings.IndexByte(s, '@'); i >= 0 {
		s = s[:i]
	}
	if i := strings.LastIndexByte(s, ':'); i > strings.LastIndexByte(s, '/') {
		s = s[:i]
	}
	return s
}

// labelSupervised labels the pod template beside the pod spec at path
// (the Pod itself for a Pod) as running containers under the live update
// supervisor: the operator watches such pods to sync one that starts
// after a live update as soon as it runs.
func labelSupervised(obj *unstructured.Unstructured, specPath []string) error {
	path := append(slices.Clone(specPath[:len(specPath)-1]), "metadata", "labels")
	labels, _, err := unstructured.NestedStringMap(obj.Object, path...)
	if err != nil {
		return fmt.Errorf("%s is not a map of strings: %v", strings.Join(path, "."), err)
	}
	if labels == nil {
		labels = map[string]string{}
	}
	labels[v1alpha1.LabelLiveUpdate] = v1alpha1.LiveUpdateSupervised
	return unstructured.SetNestedStringMap(obj.Object, labels, path...)
}
