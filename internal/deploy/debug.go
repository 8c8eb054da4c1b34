package deploy

import (
	"fmt"
	"strconv"

	"github.com/devloop-dev/devloop/api/v1alpha1"
)

// DebugEntrypoint is what a built image in debug mode runs when a
// container gives no command: its images[].entrypoint and cmd.
type DebugEntrypoint struct {
	Entrypoint []string `json:"entrypoint,omitempty"`
	Cmd        []string `json:"cmd,omitempty"`
}

// debugArgs start the program under delve, headless on DebugPort: the
// program runs at once (--continue, which needs --accept-multiclient) and
// clients attach and detach as they like. Delve starts the process
// itself, so it needs no ptrace capability and the pod stays within the
// restricted Pod Security Standard.
//
// Delve's API has no authentication and lets a client read any file the
// program can (the ServiceAccount token among them), memory and
// variables: it listens on the pod's loopback only, never on the pod IP
// that every pod of the cluster can reach. A port-forward (`kubectl
// devloop debug`) connects inside the pod's network namespace, to
// 127.0.0.1, and so still reaches it. That connection comes from the
// container runtime (root), not from the program's user, and delve on a
// loopback address refuses other users' connections by default
// (--only-same-user, which it skips for any other listen address, as
// with the :40000 of before): the check is turned off. What can reach the
// pod's loopback is the pod's own containers and a port-forward, which
// needs pods/portforward in the namespace.
var debugArgs = []string{"exec", "--headless", "--listen=" + debugListenAddress, "--only-same-user=false",
	"--api-version=2", "--accept-multiclient", "--continue"}

// debugListenAddress is where delve listens in a debugged container: the
// pod's loopback, on DebugPort.
var debugListenAddress = "127.0.0.1:" + strconv.Itoa(v1alpha1.DebugPort)

// refuseDebugOnHostNetwork refuses a pod spec (at specPath in its
// object) on the node's network whose containers run an image in debug
// mode: there the pod's loopback, where delve listens with no
// authentication, is the node's, which every process of the node and
// every other hostNetwork pod on it reaches.
func refuseDebugOnHostNetwork(spec map[string]any, index map[string]*BuiltImage, specPath string) error {
	if host, _ := spec["hostNetwork"].(bool); !host {
		return nil
	}
	containers, _ := spec["containers"].([]any)
	for _, item := range containers {
		c, _ := item.(map[string]any)
		image, _ := c["image"].(string)
		if img, ok := lookupImage(index, image); ok && img.Debug != nil {
			return fmt.Errorf("%s.hostNetwork is true, and delve cannot listen on the node's loopback: take image %s out of debug mode (annotation %s) or the pod off the host network",
				specPath, img.Name, v1alpha1.DebugAnnotation)
		}
	}
	return nil
}

// debugContainer rewrites one container (an unstructured object) running
// a debug build to start its program under delve at DebugDelvePath:
// command = [dlv exec ... PROGRAM -- ARGS], args removed. What the
// container would have run follows the Kubernetes rules: its command, or
// else the image's entrypoint; its args, or else (with no command) the
// image's cmd. Its liveness probe is removed, since a process paused at
// a breakpoint fails it and the kubelet would restart the container under
// the debugger. A container already under delve is left as it is.
func debugContainer(c map[string]any, dbg *DebugEntrypoint) error {
	name, _ := c["name"].(string)
	command, err := stringList(c, "command")
	if err != nil {
		return fmt.Errorf("container %s: %v", name, err)
	}
	if len(command) > 0 && command[0] == v1alpha1.DebugDelvePath {
		delete(c, "livenessProbe")
		return nil
	}
	argv, err := containerProgram(c, dbg.Entrypoint, dbg.Cmd)
	if err != nil {
		return err
	}
	if len(argv) == 0 {
		return fmt.Errorf("container %s: the image is in debug mode but neither the container's command nor the image's entrypoint or cmd (images[].entrypoint, images[].cmd) says what program to run under delve", name)
	}
	dlv := append([]any{v1alpha1.DebugDelvePath}, toAny(debugArgs)...)
	dlv = append(append(dlv, argv[0], "--"), toAny(argv[1:])...)
	c["command"] = dlv
	delete(c, "args")
	delete(c, "livenessProbe")
	return nil
}

// containerProgram is the argv a container runs by the Kubernetes rules:
// its command, or else the image's entrypoint; its args, or else (with no
// command) the image's cmd. Empty when nothing says what to run.
func containerProgram(c map[string]any, entrypoint, cmd []string) ([]string, error) {
	name, _ := c["name"].(string)
	command, err := stringList(c, "command")
	if err != nil {
		return nil, fmt.Errorf("container %s: %v", name, err)
	}
	args, err := stringList(c, "args")
	if err != nil {
		return nil, fmt.Errorf("container %s: %v", name, err)
	}
	_, hasArgs := c["args"]
	argv := command
	switch {
	case len(command) > 0 && hasArgs:
		argv = append(argv, args...)
	case len(command) == 0:
		argv = append(append([]string(nil), entrypoint...), args...)
		if !hasArgs {
			argv = append(argv, cmd...)
		}
	}
	return argv, nil
}

// stringList reads a container's list of strings field (absent: nil).
func stringList(c map[string]any, field string) ([]string, error) {
	v, ok := c[field]
	if !ok || v == nil {
		return nil, nil
	}
	list, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("%s is not a list", field)
	}
	out := make([]string, 0, len(list))
	for i, item := range list {
		s, ok := item.(string)
		if !ok {
			return nil, fmt.Errorf("%s[%d] is not a string", field, i)
		}
		out = append(out, s)
	}
	return out, nil
}

func toAny(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}
