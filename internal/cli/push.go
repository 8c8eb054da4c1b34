package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/image"
	"github.com/devloop-dev/devloop/internal/source"
	"github.com/devloop-dev/devloop/internal/timeline"
)

// pushFlags are the options of `push`.
type pushFlags struct {
	env, source string
	watch       bool
	debounce    time.Duration
	timeout     time.Duration
	noFollow    bool
	delta       bool
	compression string
	layer       source.Compression // compression, parsed
	label       string             // -l: follow only components with it
	portForward bool               // with --watch: keep components[].ports open
}

func newPushCommand(a *app) *cobra.Command {
	f := &pushFlags{}
	cmd := &cobra.Command{
		Use:   "push DIR --env ENV --source SOURCE",
		Short: "Push a directory as an environment's OCI source and follow the rollout",
		Long: `Pack DIR reproducibly (sorted entries, fixed times and owners; .git and what
git ignores left out: git's global excludes, the repository's info/exclude
and .gitignore files from its root down, and .devloopignore files in DIR and
below; a pattern that ignores DIR itself does not apply), push it
as an OCI artifact to the source's oci.repository:tag (plain HTTP only when
the source says insecure: true; credentials from your docker config), ask
the environment to reconcile now (annotation devloop.dev/reconcile-requested-at),
and follow it until the components that use the source, and those that
depend on them, are Ready — or one Failed or the environment is Stalled:
then it prints the reason and exits 1. -l LABEL follows only those of them
with the label (components[].labels). Content the registry and the
environment already have is a no-op.

--watch pushes again on every change under DIR (ignored paths excepted),
debounced, until Ctrl-C. While watching, type p and Enter to pause, r and
Enter to resume (changes made while paused are pushed then), Enter alone to
push now, q and Enter to stop. While watching, the ports the components
declare (components[].ports; of the -l components with -l) are forwarded as
by port-forward; --port-forward=false leaves them alone (a local port in use
is reported and the watch goes on).`,
		Example: `  kubectl devloop push ./bin --env volcano --source local
  kubectl devloop push . --env hello --source app --watch
  kubectl devloop push . --env volcano --source local --watch -l core`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if f.env == "" || f.source == "" {
				return errors.New("push needs --env (the DevEnvironment) and --source (the name of its oci source)")
			}
			if st, err := os.Stat(args[0]); err != nil || !st.IsDir() {
				return fmt.Errorf("%s is not a directory", args[0])
			}
			var err error
			if f.layer, err = source.ParseCompression(f.compression); err != nil {
				return fmt.Errorf("--compression %w", err)
			}
			s, err := a.connect()
			if err != nil {
				return err
			}
			t, err := resolvePushTarget(cmd.Context(), s, f.env, f.source, args[0])
			if err != nil {
				return err
			}
			if err := checkLabel(cmd.Context(), s, f.env, f.label); err != nil {
				return err
			}
			if f.watch {
				return a.watchAndPush(cmd.Context(), s, t, f)
			}
			return a.pushOnce(cmd.Context(), s, t, f)
		},
	}
	cmd.Flags().StringVar(&f.env, "env", "", "the DevEnvironment whose source to push")
	cmd.Flags().StringVar(&f.source, "source", "", "the name of the environment's oci source (spec.sources[].name)")
	cmd.Flags().BoolVarP(&f.watch, "watch", "w", false, "push again on every change until Ctrl-C")
	cmd.Flags().BoolVar(&f.portForward, "port-forward", true, "with --watch: forward the components' declared ports (components[].ports) while watching")
	cmd.Flags().DurationVar(&f.debounce, "debounce", 300*time.Millisecond, "with --watch: wait this long after the last change before pushing (files moved into place whole, as go build writes its output: 10ms)")
	cmd.Flags().DurationVar(&f.timeout, "timeout", 0, "give up following the rollout after this long (0: no limit)")
	cmd.Flags().BoolVar(&f.noFollow, "no-follow", false, "push and request the reconcile, but do not wait for the rollout")
	cmd.Flags().StringVarP(&f.label, "selector", "l", "", "follow only the components with this label (components[].labels)")
	cmd.Flags().BoolVar(&f.delta, "delta", false, "send each binary an image copies as a delta against the one this machine last pushed whole (for a slow uplink)")
	cmd.Flags().StringVar(&f.compression, "compression", "auto", "gzip, none, or auto: none for a registry on a loopback, private or cluster-internal address, gzip for others")
	return cmd
}

// pushTarget is where a directory goes: the source's repository and tag.
type pushTarget struct {
	dir      string
	env      string
	source   string
	ref      string // repository:tag
	insecure bool
	// read is the environment as resolvePushTarget read it: the first
	// push uses it rather than read it again a moment later (one round
	// trip fewer before the upload); a watch's later pushes take it from
	// feed, or read it anew when no watch is open.
	read *v1alpha1.DevEnvironment
	feed *envFeed
	// deltas are the bases of push --delta.
	deltas *deltaBases
	// pusher is the registry client of every push (pusherFor).
	pusher      *source.Pusher
	pusherOpts  source.PushOptions
	pusherOwner string
	pusherMade  time.Time
}

// resolvePushTarget reads the source from the environment's spec and says
// what to do when push cannot work with it.
func resolvePushTarget(ctx context.Context, s *session, envName, srcName, dir string) (*pushTarget, error) {
	env, err := s.getEnv(ctx, envName)
	if err != nil {
		return nil, err
	}
	if src := env.Spec.Source(srcName); src != nil {
		if src.OCI == nil {
			return nil, fmt.Errorf("source %q of devenvironment/%s has no oci repository (it is a %s source): push works only for oci sources; add one, e.g. {name: local, oci: {repository: <registry>/<path>, tag: dev}}", srcName, envName, sourceKind(*src))
		}
		if src.OCI.Digest != "" {
			return nil, fmt.Errorf("source %q of devenvironment/%s pins oci.digest %s: a push moves a tag, so set spec.sources[].oci.tag instead of digest", srcName, envName, src.OCI.Digest)
		}
		tag := src.OCI.Tag
		if tag == "" {
			tag = "latest"
		}
		return &pushTarget{dir: dir, env: envName, source: srcName, ref: src.OCI.Repository + ":" + tag, insecure: src.OCI.Insecure, read: env, deltas: pushDeltaBases()}, nil
	}
	var oci []string
	for _, src := range env.Spec.Sources {
		if src.OCI != nil {
			oci = append(oci, src.Name)
		}
	}
	hint := "it has no oci sources"
	if len(oci) > 0 {
		hint = "its oci sources are " + strings.Join(oci, ", ")
	}
	return nil, fmt.Errorf("devenvironment/%s has no source %q: %s", envName, srcName, hint)
}

func sourceKind(src v1alpha1.Source) string {
	switch {
	case src.Git != nil:
		return "git"
	case src.SourceRef != nil:
		return "Flux " + src.SourceRef.Kind
	}
	return "non-oci"
}

// registryHost is the registry of ref, "" when ref does not parse (the
// push then fails with the parser's own words).
func registryHost(ref string) string {
	r, err := name.ParseReference(ref)
	if err != nil {
		return ""
	}
	return r.Context().RegistryStr()
}

// pushOnce packs and pushes the directory, requests a reconcile and
// follows the rollout, printing how long each part took and, once the
// change serves, where its time went (push_breakdown.go).
func (a *app) pushOnce(ctx context.Context, s *session, t *pushTarget, f *pushFlags) error {
	follow, err := a.pushChange(ctx, s, t, f)
	if err != nil || follow == nil {
		return err
	}
	return follow(ctx)
}

// pushChange packs and pushes the directory and requests a reconcile; it
// returns how to follow the change (nil when there is nothing to follow),
// so that push --watch can push the next change without waiting for it.
func (a *app) pushChange(ctx context.Context, s *session, t *pushTarget, f *pushFlags) (func(context.Context) error, error) {
	start := time.Now()
	env := t.read
	t.read = nil
	if env == nil {
		env = t.feed.latest()
	}
	if env == nil {
		var err error
		if env, err = s.getEnv(ctx, t.env); err != nil {
			return nil, err
		}
	}
	pusher, opts := t.pusherFor(s, env)
	t.warmRegistry()
	var bases func(from, to string) *source.DeltaBase
	if f.delta {
		bases = t.deltas.lookup(repositoryOf(t.ref))
	}
	img, err := packSource(t.dir, env, t.source, f.layer.For(registryHost(t.ref)), bases)
	if err != nil {
		return nil, err
	}
	digest, err := img.Digest()
	if err != nil {
		return nil, err
	}
	size := int64(0)
	if layers, err := img.Layers(); err == nil {
		for _, l := range layers {
			n, _ := l.Size()
			size += n
		}
	}
	packed := time.Since(start)

	// Only content the environment already has may be a no-op: then the
	// registry is asked whether it holds it too. New content is pushed
	// at once (the upload skips the blobs the registry has), one round
	// trip fewer before the operator can start.
	remote := ""
	if sourceDigest(env, t.source) == digest.String() {
		if remote, err = source.RemoteDigest(ctx, t.ref, opts); err != nil {
			return nil, fmt.Errorf("reading %s: %w", t.ref, err)
		}
	}
	pushStart := time.Now()
	var stats source.PushStats
	if remote != digest.String() {
		if stats, err = pusher.Push(ctx, img, t.ref); err != nil {
			return nil, fmt.Errorf("pushing %s: %w", t.dir, err)
		}
		if f.delta {
			if err := t.deltas.keepWhole(repositoryOf(t.ref), img); err != nil {
				fmt.Fprintf(a.errOut(), "warning: keeping the pushed binaries as the next delta's bases: %v\n", err)
			}
		}
	}
	pushed := time.Since(pushStart)

	if remote == digest.String() && sourceDigest(env, t.source) == digest.String() {
		fmt.Fprintf(a.out(), "unchanged: %s@%s is already what devenvironment/%s has (packed in %s); nothing pushed\n",
			t.ref, shortDigest(digest.String()), t.env, seconds(packed))
		return nil, nil
	}
	if remote == digest.String() {
		fmt.Fprintf(a.out(), "already in the registry: %s@%s (%s; pack %s, push %s)\n", t.ref, shortDigest(digest.String()), humanBytes(size), seconds(packed), seconds(pushed))
	} else {
		fmt.Fprintf(a.out(), "pushed %s@%s (%s; %s; pack %s, push %s)\n", t.ref, shortDigest(digest.String()), humanBytes(size), stats, seconds(packed), seconds(pushed))
		if d := describeDeltas(img); d != "" {
			fmt.Fprintf(a.out(), "sent %s\n", d)
		}
	}

	// What this push measured rides with the reconcile request, for the
	// operator's change timeline (internal/timeline).
	measured := timeline.Pushed{Source: t.source, Digest: digest.String(), At: start, Pack: packed, Upload: pushed}
	token, err := requestReconcile(ctx, s, env, map[string]string{timeline.PushedAnnotation: measured.String()})
	if err != nil {
		return nil, err
	}
	sent := clientSteps{pushed: measured, stats: stats, requested: time.Now()}
	if f.noFollow {
		return nil, nil
	}
	affected := withLabel(env, affectedComponents(env, t.source), f.label)
	return func(ctx context.Context) error {
		if len(affected) == 0 {
			fmt.Fprintf(a.out(), "no component uses source %s; waiting for the environment to resolve it\n", t.source)
		} else {
			fmt.Fprintf(a.out(), "following %s\n", strings.Join(affected, ", "))
		}
		p := newProgress(a.out(), a.opts.ProgressInterval)
		err := a.follow(ctx, s, t.env, f.timeout, p, rolloutCheck(token, t.source, digest.String(), affected))
		if err != nil {
			return err
		}
		fmt.Fprintf(a.out(), "Ready in %s (pack %s, push %s, rollout %s)\n", seconds(time.Since(start)), seconds(packed), seconds(pushed), seconds(p.elapsed()))
		// Live update or rollout, per live-updatable image, and why.
		if env, err := s.getEnv(ctx, t.env); err == nil {
			a.printHowUpdated(env, affected)
			a.printBreakdown(ctx, s, env, sent)
		}
		return nil
	}, nil
}

// pusherFor is the registry client of this process's pushes to the
// target, made once: one transport (kept-alive connections), one
// authentication, and the blobs of the last push remembered. It is made
// again for another ServiceAccount and before a requested registry token
// (push_keychain.go) can expire.
func (t *pushTarget) pusherFor(s *session, env *v1alpha1.DevEnvironment) (*source.Pusher, source.PushOptions) {
	owner := env.Namespace + "/" + env.Spec.ServiceAccountName
	opts := source.PushOptions{Insecure: t.insecure, Keychain: &pushKeychain{clientset: s.clientset, namespace: env.Namespace, sa: env.Spec.ServiceAccountName, insecure: t.insecure}}
	if t.pusher == nil || t.pusherOwner != owner || time.Since(t.pusherMade) > registryTokenLifetime/2 {
		t.pusher = source.NewPusher(opts, pushMemory())
		t.pusherOwner, t.pusherMade, t.pusherOpts = owner, time.Now(), opts
	}
	return t.pusher, t.pusherOpts
}

// warmRegistry resolves the push's credentials for the registry while
// the directory is packed: whether the registry wants a devloop token is
// a request of its own (pushKeychain), made once per process, and its
// connection is kept alive for the upload's. Off the path of a change
// rather than before its upload: one round trip or two across a link.
func (t *pushTarget) warmRegistry() {
	k, ok := t.pusherOpts.Keychain.(*pushKeychain)
	if !ok {
		return
	}
	reg, err := name.NewRegistry(registryHost(t.ref))
	if err != nil {
		return
	}
	go func() { _, _ = k.Resolve(reg) }()
}

// pushMemory remembers the blobs of each repository's last push in the
// user's cache directory, for the next push process; in memory alone
// when there is none.
func pushMemory() *source.Remembered {
	dir, err := os.UserCacheDir()
	if err != nil {
		return &source.Remembered{}
	}
	return &source.Remembered{Dir: filepath.Join(dir, "devloop", "pushed")}
}

// PackSource packs dir as the source srcName of env, as push does: what
// .gitignore and .devloopignore files ignore left out and, for an
// uncompressed (local) push, the files that images copy without a run step
// already laid out as their layers (image.PrebuildLayers), so the
// operator mounts those layers instead of uploading them again.
func PackSource(dir string, env *v1alpha1.DevEnvironment, srcName string, c source.Compression) (v1.Image, error) {
	return packSource(dir, env, srcName, c, nil)
}

// packSource is PackSource with each mapped layer sent as a delta against
// what bases names for its mapping (nil: none; push --delta).
func packSource(dir string, env *v1alpha1.DevEnvironment, srcName string, c source.Compression, bases func(from, to string) *source.DeltaBase) (v1.Image, error) {
	m, err := loadIgnore(dir)
	if err != nil {
		return nil, fmt.Errorf("reading ignore files in %s: %w", dir, err)
	}
	var mapped []source.MappedLayer
	if c == source.CompressionNone {
		if mapped, err = image.PrebuildLayers(dir, copyingImages(env, srcName), m.Exclude); err != nil {
			return nil, fmt.Errorf("packing %s: %w", dir, err)
		}
		if bases != nil {
			for i := range mapped {
				mapped[i].Base = bases(mapped[i].From, mapped[i].To)
			}
		}
	}
	return source.PackDir(dir, m.Exclude, c, mapped...)
}

// copyingImages are the images of env that copy files of source srcName
// without a run step: their layers are the files as pushed.
func copyingImages(env *v1alpha1.DevEnvironment, srcName string) []v1alpha1.ImageSpec {
	var out []v1alpha1.ImageSpec
	for _, c := range env.Spec.Components {
		for _, img := range c.Images {
			if img.Source == srcName && img.Run == nil && len(img.Layers) > 0 {
				out = append(out, img)
			}
		}
	}
	return out
}

// requestReconcile sets the reconcile-request annotation to a fresh value
// (and the annotations in also, in the same write) and returns it: the
// operator echoes it in status.lastHandledReconcileAt once a reconcile has
// acted on it.
func requestReconcile(ctx context.Context, s *session, env *v1alpha1.DevEnvironment, also map[string]string) (string, error) {
	token := time.Now().UTC().Format(time.RFC3339Nano)
	patched := env.DeepCopy()
	if patched.Annotations == nil {
		patched.Annotations = map[string]string{}
	}
	patched.Annotations[v1alpha1.ReconcileRequestAnnotation] = token
	for k, v := range also {
		patched.Annotations[k] = v
	}
	if err := s.client.Patch(ctx, patched, client.MergeFrom(env)); err != nil {
		return "", fmt.Errorf("requesting a reconcile of devenvironment/%s (annotation %s): %w", env.Name, v1alpha1.ReconcileRequestAnnotation, err)
	}
	return token, nil
}

// sourceDigest is the digest the environment last resolved a source to.
func sourceDigest(env *v1alpha1.DevEnvironment, name string) string {
	s := env.Status.Source(name)
	switch {
	case s == nil:
		return ""
	case s.Digest != "":
		return s.Digest
	}
	_, d, _ := strings.Cut(s.Revision, "@")
	return d
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
