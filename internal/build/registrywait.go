package build

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/message"
	"github.com/devloop-dev/devloop/internal/pods"
)

// A builder Job's assemble container waits for a registry that is down
// (helper/registrywait.go) instead of exiting at once, so the build is
// pushed a few seconds after the registry returns, not after the Job is
// replaced and its build command run again. It says so on its log, one
// line per try, beginning with RegistryWaitLogPrefix; the operator reads
// the last line to report the environment Waiting for the registry
// rather than building.

// RegistryWaitLogPrefix begins the assemble container's log line for each
// try that found the registry down.
const RegistryWaitLogPrefix = "devloop: waiting for the registry"

// RegistryWaitLogSince begins the part of that line that changes from one
// try to the next (how long the registry has been down), which the
// operator leaves out of status so that status is not rewritten per try.
const RegistryWaitLogSince = " (down for "

// maxRegistryWait bounds how long an assemble container waits; past it the
// container exits ExitUnavailable and the Job is replaced (engine_retries.go).
const maxRegistryWait = 10 * time.Minute

// registryWaitFor is how long a builder Job's assemble container waits for
// the registry: half its run.timeout, so that a long wait ends as a wait
// for the registry rather than as the Job's deadline.
func registryWaitFor(timeout time.Duration) time.Duration {
	return min(timeout/2, maxRegistryWait)
}

// registryWaitIn is the last line of the running assemble container of the
// newest of jobPods when that line says it waits for the registry, and ""
// otherwise (or when the log cannot be read).
func (s *imageBuilds) registryWaitIn(ctx context.Context, jobPods []corev1.Pod) string {
	if len(jobPods) == 0 {
		return ""
	}
	pod := newestPod(jobPods)
	if runningSince(pod, ContainerAssemble).IsZero() {
		return ""
	}
	// A log that cannot be read reads "(log not available: …)": no wait.
	out := pods.TailFor(ctx, s.e.LogsFor, s.e.Logs, s.tenant, s.env.Namespace, pod.Name, ContainerAssemble, 1)
	last := strings.TrimSpace(message.LastLine(out))
	if !strings.HasPrefix(last, RegistryWaitLogPrefix) {
		return ""
	}
	return last
}

// registryWaitMessage is the image's status while its builder Job's
// assemble container waits for the registry; line is that container's
// last log line. It reads as a Job that found the registry down did, so
// a user sees one message for one cause.
func registryWaitMessage(img *v1alpha1.ImageSpec, job, line string) string {
	line = strings.TrimPrefix(strings.TrimPrefix(line, RegistryWaitLogPrefix), ": ")
	if i := strings.LastIndex(line, RegistryWaitLogSince); i >= 0 {
		line = line[:i]
	}
	return fmt.Sprintf("image %s: the registry was unavailable to container %s of builder job %s: %s; it pushes as soon as the registry answers",
		img.Name, ContainerAssemble, job, message.Truncate(line, 400))
}
