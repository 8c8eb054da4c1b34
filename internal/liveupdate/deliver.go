package liveupdate

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/engine"
	"github.com/devloop-dev/devloop/internal/fault"
	"github.com/devloop-dev/devloop/internal/identity"
	"github.com/devloop-dev/devloop/internal/message"
	"github.com/devloop-dev/devloop/internal/timeline"
)

// Executor runs a command in a container of a pod as the tenant, with
// stdin (identity.Tenant.ExecWithStdin does; tests script it).
type Executor interface {
	Exec(ctx context.Context, t *identity.Tenant, namespace, pod, container string, command []string, stdin io.Reader, stdout, stderr io.Writer) error
}

// Registry reads images the environment pushed (build.Engine does, with
// the reconcile's registry client); platform picks one image of an index
// ("" for an image of one platform).
type Registry interface {
	PushedImage(ctx context.Context, req engine.Request, image, digest, platform string) (v1.Image, error)
	// Publishing is this reconcile's build of image while it is pushed:
	// its digest, the image as assembled (of one platform), and wait,
	// which joins the push and only then records the digest in the
	// image's status. wait is nil when no build of image is being pushed
	// (see syncWhilePushed).
	Publishing(req engine.Request, image string) (digest string, assembled v1.Image, wait func(context.Context) error)
}

// Engine live updates components (see the package doc).
type Engine struct {
	// Images reads the images a component's builds pushed.
	Images Registry
	// Events records LiveUpdated; nil records nothing.
	Events events.EventRecorder
	// Exec syncs pods; nil execs as the tenant.
	Exec Executor
	// Nodes lists the nodes, for the platform of the node a pod of a
	// multi-platform image runs on (its kubernetes.io/os and /arch
	// labels): the operator's own reader, since a tenant may not read
	// nodes, and only their labels are used.
	Nodes client.Reader
	// MaxBytes bounds the files one live update carries;
	// DefaultMaxBytes when zero.
	MaxBytes int64
	// Sessions keeps one exec of the supervisor's sync open per
	// container (session.go), so a live update pays no exec setup.
	Sessions bool

	mu sync.Mutex
	// tars keeps the last few live updates' tars, so a pod started later
	// is synced without reading the images again (deliver_cache.go).
	tars []cachedTar
	// entries keeps the last few layers' listings, per environment: the
	// next live update compares with the layer this one brought, which
	// is then not read from the registry again (deliver_cache.go).
	entries []cachedEntries
	// sessions are the open sync sessions by sessionKey; noStream the
	// containers whose supervisor cannot stream.
	sessions map[string]*session
	noStream map[string]bool
	// baseBytes are the bytes of the tars sessions keep as their
	// deltas' bases (maxBaseBytes).
	baseBytes int64
}

// DefaultMaxBytes is the most file content one live update carries; a
// bigger change is rolled out.
const DefaultMaxBytes = 256 << 20

// Outcome is what a live update did.
type Outcome struct {
	// Synced names the pods synced by this reconcile, for an event.
	Synced []string
}

// update brings every live-updatable image of the component to its
// newest digest in place when that may be done (Decide), syncing every
// running pod; else, or when a sync fails, it records a rollout (with
// why) and leaves DeployDigest at Digest for the deploy step to roll
// out. It writes the images' liveDigest, lastUpdate and updateReason.
func (e *Engine) update(ctx context.Context, req engine.Request) (Outcome, error) {
	var out Outcome
	for i := range req.Component.Images {
		img := &req.Component.Images[i]
		ist := req.Status.Image(img.Name)
		if img.LiveUpdate == nil || ist == nil || ist.Digest == "" {
			continue
		}
		if err := e.updateImage(ctx, req, img, ist, &out); err != nil {
			return out, err
		}
	}
	return out, nil
}

// updateImage is Update for one image.
func (e *Engine) updateImage(ctx context.Context, req engine.Request, img *v1alpha1.ImageSpec, ist *v1alpha1.ImageStatus, out *Outcome) error {
	early, err := e.syncWhilePushed(ctx, req, img, ist, out)
	if err != nil {
		return err
	}
	switch {
	case ist.TemplateDigest == ist.Digest:
		// The templates run it: nothing in place; pods started since
		// are told so, which starts their program without waiting.
		ist.LiveDigest = ""
		_, err := e.openGates(ctx, req, img, ist)
		var failed *SyncError
		if errors.As(err, &failed) {
			// The supervisor starts the program after its gate timeout
			// anyway: nothing to roll out.
			log.FromContext(ctx).Info("telling a new pod's supervisor it is current failed", "image", img.Name, "pod", failed.Pod, "error", failed.Err.Error())
			return nil
		}
		return err
	case ist.TemplateDigest == "":
		rollout(ist, "the pods run no live-updatable build of this image yet")
		return nil
	}
	if ist.LiveDigest != ist.Digest {
		if reason := e.mustRollOut(req, img); reason != "" {
			rollout(ist, reason)
			return nil
		}
		d := early.of(ist) // synced while pushed: its tar is remembered
		if d == nil {
			planned := time.Now()
			var tars map[string][]byte
			if d, tars, err = e.plan(ctx, req, img, ist); err != nil {
				return err
			}
			log.FromContext(ctx).V(1).Info("live update planned", "image", img.Name, "live", d.Live, "files", len(d.Files),
				"platforms", len(tars), "took", time.Since(planned).String())
			if !d.Live {
				rollout(ist, d.Reason)
				return nil
			}
			e.remember(req.Env.UID, img.Name, ist.TemplateDigest, ist.Digest, tars)
		}
		ist.LiveDigest, ist.LastUpdate = ist.Digest, v1alpha1.UpdateLive
		ist.UpdateReason = message.Truncate(describeFiles(d.Files), v1alpha1.MaxUpdateReason)
	}
	syncing := time.Now()
	synced, err := e.converge(ctx, req, img, ist)
	if len(synced) > 0 {
		// The change timeline's LiveUpdate step (internal/timeline).
		timeline.Mark(timeline.InComponent(ctx, img.Name), timeline.LiveUpdate, syncing)
	}
	out.Synced = append(out.Synced, synced...)
	var failed *SyncError
	if errors.As(err, &failed) {
		log.FromContext(ctx).Info("a live update sync failed, rolling out instead", "image", img.Name, "pod", failed.Pod, "error", failed.Err.Error())
		rollout(ist, failed.Error())
		return nil
	}
	return err
}

// mustRollOut says why an image is rolled out whatever its files: in
// debug mode (a different build), or written into chart values as a tag
// by imageValues (from: Tag or Revision: the tag names one build, so the
// values, and with them the release, change with every build). An image
// a chart receives by reference, digest, repository, registry or name is
// live updated like any other: the deploy engine keeps writing the digest
// the templates run (DeployDigest), so the release's values and render
// are unchanged and Helm is not called; a release upgraded for another
// reason brings its live images to their newest build (deploy's
// liveChartImages). An image of several platforms is planned per
// platform (plan), each pod synced with its node's platform's files.
func (e *Engine) mustRollOut(req engine.Request, img *v1alpha1.ImageSpec) string {
	if img.Run != nil && req.Env.DebugsImage(img.Name) {
		return "in debug mode (" + v1alpha1.DebugAnnotation + ")"
	}
	for _, c := range req.Env.Spec.Components {
		for _, v := range c.ImageValues() {
			if v.Image == img.Name && (v.From == "Tag" || v.From == "Revision") {
				return fmt.Sprintf("component %s's helm.imageValues writes its tag into the chart's values (%s, from: %s): a tag names one build; from: Reference, Digest, Registry or Repository is live updated", c.Name, v.Path, v.From)
			}
		}
	}
	return ""
}

// platformsOf are the platforms a live update plans for: each of an
// image's several platforms (images[].platforms), or "" for an image of
// one platform.
func platformsOf(img *v1alpha1.ImageSpec) []string {
	if len(img.Platforms) > 1 {
		return img.Platforms
	}
	return []string{""}
}

// plan decides between the template's digest and Digest for every
// platform of the image; when all of them may be live updated it writes
// each platform's tar of its changed files, by platform ("" for an image
// of one platform). A platform that must roll out rolls the image out,
// the reason naming it.
func (e *Engine) plan(ctx context.Context, req engine.Request, img *v1alpha1.ImageSpec, ist *v1alpha1.ImageStatus) (*Decision, map[string][]byte, error) {
	var first *Decision
	tars := map[string][]byte{}
	for _, p := range platformsOf(img) {
		d, data, err := e.planPlatform(ctx, req, img, ist, p)
		if err != nil {
			return nil, nil, err
		}
		if !d.Live {
			if p != "" {
				d.Reason = p + ": " + d.Reason
			}
			return d, nil, nil
		}
		if first == nil {
			first = d
		}
		tars[p] = data
	}
	return first, tars, nil
}

// planPlatform decides between the template's digest and Digest for one
// platform, and on a live update writes the tar of the changed files.
func (e *Engine) planPlatform(ctx context.Context, req engine.Request, img *v1alpha1.ImageSpec, ist *v1alpha1.ImageStatus, platform string) (*Decision, []byte, error) {
	next, err := e.Images.PushedImage(ctx, req, img.Name, ist.Digest, platform)
	if err != nil {
		return nil, nil, fmt.Errorf("live update of image %s: %w", img.Name, err)
	}
	return e.planFrom(ctx, req, img, ist, platform, next)
}

// planFrom is planPlatform with the platform's image of Digest at hand.
func (e *Engine) planFrom(ctx context.Context, req engine.Request, img *v1alpha1.ImageSpec, ist *v1alpha1.ImageStatus, platform string, next v1.Image) (*Decision, []byte, error) {
	old, err := e.Images.PushedImage(ctx, req, img.Name, ist.TemplateDigest, platform)
	if err != nil {
		return nil, nil, fmt.Errorf("live update of image %s: %w", img.Name, err)
	}
	max := e.MaxBytes
	if max <= 0 {
		max = DefaultMaxBytes
	}
	d, err := decide(old, next, img.LiveUpdate.Paths, e.entriesOf(req.Env.UID), max)
	if errors.Is(err, ErrLayerNotItsDiffID) {
		// A human must fix the image (its base, most likely): the
		// kubelet would refuse to unpack it too.
		return nil, nil, fault.Permanentf("live update of image %s: %v; a base image's config most likely lies (%s.base)", img.Name, err, imageField(req.Env, img.Name))
	}
	if err != nil {
		return nil, nil, fmt.Errorf("live update of image %s: comparing %s with %s: %w", img.Name, ist.TemplateDigest, ist.Digest, err)
	}
	if !d.Live {
		return d, nil, nil
	}
	var buf bytes.Buffer
	buf.Grow(keptTarSize(d.Files))
	if err := WriteTar(&buf, next, d.Files, max); err != nil {
		if errors.Is(err, ErrTooBig) {
			return &Decision{Reason: err.Error()}, nil, nil
		}
		return nil, nil, fmt.Errorf("live update of image %s: %w", img.Name, err)
	}
	return d, buf.Bytes(), nil
}

// rollout records that Digest is rolled out, and why.
func rollout(ist *v1alpha1.ImageStatus, reason string) {
	ist.LiveDigest = ""
	ist.LastUpdate = v1alpha1.UpdateRollout
	ist.UpdateReason = message.Truncate(reason, v1alpha1.MaxUpdateReason)
}

// describeFiles says what a live update carries: "2 files: /app, /srv/x".
func describeFiles(files []File) string {
	names := make([]string, 0, len(files))
	for _, f := range files {
		n := f.Path
		if f.Deleted {
			n += " (deleted)"
		}
		names = append(names, n)
	}
	if len(files) == 1 {
		return "synced in place: " + names[0]
	}
	return fmt.Sprintf("synced in place: %d files: %s", len(files), strings.Join(names, ", "))
}

// imageField is "spec.components[i].images[j]" of the image named image.
func imageField(env *v1alpha1.DevEnvironment, image string) string {
	for i, c := range env.Spec.Components {
		for j, img := range c.Images {
			if img.Name == image {
				return fmt.Sprintf("spec.components[%d].images[%d]", i, j)
			}
		}
	}
	return "images[]"
}
