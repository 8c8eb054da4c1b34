package testrun

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/pods"
	"github.com/devloop-dev/devloop/internal/source"
)

// ContainerTest runs the suite's command; ContainerFetch (an init
// container) fills the workspace first when the suite has a source.
const (
	ContainerTest  = "test"
	ContainerFetch = pods.ContainerFetch
)

// DefaultTimeout is a run's deadline when the spec sets none (the CRD
// defaults it to the same).
const DefaultTimeout = 30 * time.Minute

// homeDir is HOME of the test container: an emptyDir, since the fixed
// non-root user has no writable home in most images (Go's caches live
// under it).
const homeDir = v1alpha1.BuilderHome

// JobName is "<env>-<suite>-<number>": the same run always has the same
// Job, so a restarted operator finds the one it created. Names longer than
// 63 characters (Job names become pod label values) keep a hash of the
// environment and suite instead of their tails.
func JobName(env, suite string, number int64) string {
	n := "-" + strconv.FormatInt(number, 10)
	base := env + "-" + suite
	if len(base)+len(n) <= 63 {
		return base + n
	}
	sum := sha256.Sum256([]byte(env + "/" + suite))
	suffix := "-" + hex.EncodeToString(sum[:])[:8] + n
	return strings.TrimRight(base[:63-len(suffix)], "-") + suffix
}

// JobRequest is everything the Job of one run needs.
type JobRequest struct {
	Name, Namespace string
	Labels          map[string]string
	Owner           metav1.OwnerReference
	Suite           *v1alpha1.TestSuite
	// Image is the reference the test container runs: the spec's ref, or
	// a built image pinned to its digest.
	Image string
	// ServiceAccount runs the pod: the environment's, so a suite has the
	// rights the environment deploys with and no more. Empty is the
	// namespace's default.
	ServiceAccount string
	// Source, when set, is fetched into /workspace by the helper image
	// (the operator's own) before the test starts; SourceSecret holds its
	// credentials.
	Source       *source.Ref
	SourceSecret string
	HelperImage  string
	// Env adds variables before the suite's own (which win): which
	// environment, suite and run this is.
	Env []corev1.EnvVar
}

// Job is the Job of one run: no retries (a failed suite is a result, not
// a glitch to paper over), the suite's timeout as its deadline, the
// restricted Pod Security profile, the source in /workspace.
func Job(req JobRequest) (*batchv1.Job, error) {
	s := req.Suite
	if s == nil || len(s.Command) == 0 {
		return nil, errors.New("a test Job needs a suite with a command")
	}
	if req.Image == "" {
		return nil, fmt.Errorf("suite %s: no image to run", s.Name)
	}
	volumes := append(pods.WorkspaceVolumes(),
		corev1.Volume{Name: "home", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	var initContainers []corev1.Container
	if req.Source != nil {
		if req.HelperImage == "" {
			return nil, fmt.Errorf("suite %s mounts source %s, but this operator has no helper image to fetch it (--helper-image)", s.Name, req.Source.Source)
		}
		fetch, extra, err := pods.FetchContainer(req.HelperImage, *req.Source, req.SourceSecret)
		if err != nil {
			return nil, err
		}
		initContainers = append(initContainers, fetch)
		volumes = append(volumes, extra...)
	}
	if s.Report != nil {
		report, err := reportContainer(s, req.HelperImage)
		if err != nil {
			return nil, err
		}
		initContainers = append(initContainers, report)
	}
	env := append([]corev1.EnvVar{{Name: "HOME", Value: homeDir}}, req.Env...)
	for _, e := range s.Env {
		// Later entries win in a container's env.
		env = append(env, corev1.EnvVar{Name: e.Name, Value: e.Value})
	}
	timeout := DefaultTimeout
	if s.Timeout != nil && s.Timeout.Duration > 0 {
		timeout = s.Timeout.Duration
	}
	deadline := max(int64(timeout/time.Second), 1)
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Name: req.Name, Namespace: req.Namespace, Labels: req.Labels,
			OwnerReferences: []metav1.OwnerReference{req.Owner},
		},
		Spec: batchv1.JobSpec{
			BackoffLimit:          ptr.To[int32](0),
			PodFailurePolicy:      pods.RetryDisrupted(),
			ActiveDeadlineSeconds: ptr.To(deadline),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: req.Labels},
				Spec: corev1.PodSpec{
					RestartPolicy:      corev1.RestartPolicyNever,
					ServiceAccountName: req.ServiceAccount,
					// Only suites that ask (end-to-end suites talking to
					// the cluster as the environment's ServiceAccount) get
					// its token.
					AutomountServiceAccountToken: ptr.To(req.Suite.ServiceAccountToken),
					EnableServiceLinks:           ptr.To(false),
					SecurityContext:              pods.RestrictedPod(),
					Volumes:                      volumes,
					InitContainers:               initContainers,
					Containers: []corev1.Container{{
						Name: ContainerTest, Image: req.Image, Command: s.Command,
						WorkingDir: pods.WorkspaceDir, Env: env,
						EnvFrom: v1alpha1.ContainerEnvFrom(s.EnvFrom),
						VolumeMounts: []corev1.VolumeMount{
							{Name: pods.VolumeWorkspace, MountPath: pods.WorkspaceDir},
							{Name: pods.VolumeTmp, MountPath: "/tmp"},
							{Name: "home", MountPath: homeDir},
						},
						SecurityContext:          pods.RestrictedContainer(),
						TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
					}},
				},
			},
		},
	}, nil
}
