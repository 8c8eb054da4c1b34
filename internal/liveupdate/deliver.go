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
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/engine"
	"github.com/devloop-dev/devloop/internal/identity"
	"github.com/devloop-dev/devloop/internal/message"
)

// Executor runs a command in a container of a pod as the tenant, with
// stdin (identity.Tenant.ExecWithStdin does; tests script it).
type Executor interface {
	Exec(ctx context.Context, t *identity.Tenant, namespace, pod, container string, command []string, stdin io.Reader, stdout, stderr io.Writer) error
}

// Registry reads images the environment pushed (build.Engine does, with
// the reconcile's registry client).
type Registry interface {
	PushedImage(ctx context.Context, req engine.Request, image, digest string) (v1.Image, error)
}

// Engine live updates components (see the package doc).
type Engine struct {
	// Images reads the images a component's builds pushed.
	Images Registry
	// Events records LiveUpdated; nil records nothing.
	Events events.EventRecorder
	// Exec syncs pods; nil execs as the tenant.
	Exec Executor
	// MaxBytes bounds the files one live update carries;
	// DefaultMaxBytes when zero.
	MaxBytes int64
	// Sessions keeps one exec of the supervisor's sync open per
	// container (session.go), so a live update pays no exec setup.
	Sessions bool

	mu sync.Mutex
	// tars keeps the last few live updates' tars, so a pod started later
	// is synced without reading the images again.
	tars []cachedTar
	// entries keeps the last few layers' listings by diff ID: the next
	// live update compares with the layer this one brought, which is
	// then not read from the registry again.
	entries []cachedEntries
	// sessions are the open sync sessions by sessionKey; noStream the
	// containers whose supervisor cannot stream.
	sessions map[string]*session
	noStream map[string]bool
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
		planned := time.Now()
		d, tarball, err := e.plan(ctx, req, img, ist)
		if err != nil {
			return err
		}
		log.FromContext(ctx).V(1).Info("live update planned", "image", img.Name, "live", d.Live, "files", len(d.Files),
			"bytes", len(tarball), "took", time.Since(planned).String())
		if !d.Live {
			rollout(ist, d.Reason)
			return nil
		}
		e.remember(img.Name, ist.TemplateDigest, ist.Digest, tarball)
		ist.LiveDigest, ist.LastUpdate = ist.Digest, v1alpha1.UpdateLive
		ist.UpdateReason = message.Truncate(describeFiles(d.Files), v1alpha1.MaxUpdateReason)
	}
	synced, err := e.converge(ctx, req, img, ist)
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
// debug mode (a different build), built for several platforms (an index:
// a live update would have to pick each pod's platform's files), or
// written into chart values as a tag by imageValues (from: Tag or
// Revision: the tag names one build, so the values, and with them the
// release, change with every build). An image a chart receives by
// reference, digest, repository, registry or name is live updated like
// any other: the deploy engine keeps writing the digest the templates
// run (DeployDigest), so the release's values and render are unchanged
// and Helm is not called; a release upgraded for another reason brings
// its live images to their newest build (deploy's liveChartImages).
func (e *Engine) mustRollOut(req engine.Request, img *v1alpha1.ImageSpec) string {
	if img.Run != nil && req.Env.DebugsImage(img.Name) {
		return "in debug mode (" + v1alpha1.DebugAnnotation + ")"
	}
	if len(img.Platforms) > 1 {
		return fmt.Sprintf("built for %d platforms (images[].platforms): a live update carries one platform's files", len(img.Platforms))
	}
	for _, c := range req.Env.Spec.Components {
		if c.Helm == nil {
			continue
		}
		for _, v := range c.Helm.ImageValues {
			if v.Image == img.Name && (v.From == "Tag" || v.From == "Revision") {
				return fmt.Sprintf("component %s's helm.imageValues writes its tag into the chart's values (%s, from: %s): a tag names one build; from: Reference, Digest, Registry or Repository is live updated", c.Name, v.Path, v.From)
			}
		}
	}
	return ""
}

// plan decides between the template's digest and Digest, and on a live
// update writes the tar of the changed files.
func (e *Engine) plan(ctx context.Context, req engine.Request, img *v1alpha1.ImageSpec, ist *v1alpha1.ImageStatus) (*Decision, []byte, error) {
	old, err := e.Images.PushedImage(ctx, req, img.Name, ist.TemplateDigest)
	if err != nil {
		return nil, nil, fmt.Errorf("live update of image %s: %w", img.Name, err)
	}
	next, err := e.Images.PushedImage(ctx, req, img.Name, ist.Digest)
	if err != nil {
		return nil, nil, fmt.Errorf("live update of image %s: %w", img.Name, err)
	}
	d, err := decide(old, next, img.LiveUpdate.Paths, e.layerEntries)
	if err != nil {
		return nil, nil, fmt.Errorf("live update of image %s: comparing %s with %s: %w", img.Name, ist.TemplateDigest, ist.Digest, err)
	}
	if !d.Live {
		return d, nil, nil
	}
	var buf bytes.Buffer
	max := e.MaxBytes
	if max <= 0 {
		max = DefaultMaxBytes
	}
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

// cachedTar is one live update's tar.
type cachedTar struct {
	image, from, to string
	data            []byte
}

// maxCachedTars bounds the tars kept in memory.
const maxCachedTars = 8

func (e *Engine) remember(image, from, to string, data []byte) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.tars = append(e.tars, cachedTar{image: image, from: from, to: to, data: data})
	if len(e.tars) > maxCachedTars {
		e.tars = e.tars[1:]
	}
}

func (e *Engine) recall(image, from, to string) ([]byte, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, t := range e.tars {
		if t.image == image && t.from == from && t.to == to {
			return t.data, true
		}
	}
	return nil, false
}

// cachedEntries is one layer's listing.
type cachedEntries struct {
	diffID  v1.Hash
	entries map[string]entry
}

// maxCachedLayers bounds the listings kept in memory.
const maxCachedLayers = 16

// layerEntries lists a layer, from memory when it was listed lately.
func (e *Engine) layerEntries(l v1.Layer) (map[string]entry, error) {
	id, err := l.DiffID()
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	for _, c := range e.entries {
		if c.diffID == id {
			e.mu.Unlock()
			return c.entries, nil
		}
	}
	e.mu.Unlock()
	entries, err := layerEntries(l)
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.entries = append(e.entries, cachedEntries{diffID: id, entries: entries})
	if len(e.entries) > maxCachedLayers {
		e.entries = e.entries[1:]
	}
	return entries, nil
}
