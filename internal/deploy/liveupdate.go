package deploy

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/supervisor"
)

// LiveUpdateEntrypoint is how a live-updatable image's containers run
// under the supervisor: the program when a container gives no command
// (images[].entrypoint and cmd) and the after-action of a sync.
type LiveUpdateEntrypoint struct {
	Entrypoint []string `json:"entrypoint,omitempty"`
	Cmd        []string `json:"cmd,omitempty"`
	// After is images[].liveUpdate.after; Command its command.
	After   v1alpha1.LiveUpdateAfter `json:"after,omitempty"`
	Command []string                 `json:"command,omitempty"`
}

// superviseArgs are the supervisor's arguments up to the program.
func (lu *LiveUpdateEntrypoint) superviseArgs() ([]any, error) {
	after := strings.ToLower(string(lu.After))
	if after == "" {
		after = string(supervisor.AfterRestart)
	}
	args := []any{supervisor.Path, "supervise", "--after=" + after}
	if lu.After == v1alpha1.LiveUpdateCommand {
		cmd, err := json.Marshal(lu.Command)
		if err != nil {
			return nil, err
		}
		args = append(args, "--after-command="+string(cmd))
	}
	return append(args, "--"), nil
}

// liveUpdateContainer rewrites one container (an unstructured object) of
// a live-updatable image to start its program under the supervisor the
// build put in the image: command = [/.devloop/supervisor supervise
// --after=... -- PROGRAM ARGS], args removed, the program found as for
// debug mode (containerProgram), and the live root mounted. Probes are
// kept: the program serves as before, and a restart takes milliseconds.
// A container already under the supervisor keeps its command.
func liveUpdateContainer(c map[string]any, lu *LiveUpdateEntrypoint) error {
	wrap, err := lu.superviseArgs()
	if err != nil {
		return err
	}
	return superviseContainer(c, lu, wrap)
}

// liveUpdateInitContainer wraps an init container of the image: its live
// paths are links into the live root, which only the supervisor fills, so
// it runs under the supervisor too — at once (no start gate: the
// operator syncs only running containers) and with no after-action.
func liveUpdateInitContainer(c map[string]any, lu *LiveUpdateEntrypoint) error {
	return superviseContainer(c, lu, []any{supervisor.Path, "supervise", "--after=none", "--gate-timeout=1ms", "--"})
}

// superviseContainer makes c run its program after the supervisor's
// arguments wrap, and mounts the live root.
func superviseContainer(c map[string]any, lu *LiveUpdateEntrypoint, wrap []any) error {
	name, _ := c["name"].(string)
	command, err := stringList(c, "command")
	if err != nil {
		return fmt.Errorf("container %s: %v", name, err)
	}
	if len(command) == 0 || command[0] != supervisor.Path {
		argv, err := containerProgram(c, lu.Entrypoint, lu.Cmd)
		if err != nil {
			return err
		}
		if len(argv) == 0 {
			return fmt.Errorf("container %s: the image has liveUpdate but neither the container's command nor the image's entrypoint or cmd (images[].entrypoint, images[].cmd) says what program the supervisor runs", name)
		}
		c["command"] = append(wrap, toAny(argv)...)
		delete(c, "args")
	}
	return addLiveMount(c)
}

// addLiveMount mounts the live root's volume in the container, once.
func addLiveMount(c map[string]any) error {
	mounts, _ := c["volumeMounts"].([]any)
	for _, m := range mounts {
		if mm, ok := m.(map[string]any); ok && mm["mountPath"] == supervisor.LiveRoot {
			return nil
		}
	}
	c["volumeMounts"] = append(mounts, map[string]any{"name": supervisor.LiveVolume, "mountPath": supervisor.LiveRoot})
	return nil
}

// addLiveVolume adds the live root's emptyDir to a pod spec, once. An
// emptyDir is writable by any UID (mode 0777), so the supervisor needs no
// fsGroup, root or capability, and readOnlyRootFilesystem still holds.
func addLiveVolume(spec map[string]any) error {
	volumes, ok := spec["volumes"].([]any)
	if !ok && spec["volumes"] != nil {
		return fmt.Errorf("volumes is not a list")
	}
	for _, v := range volumes {
		if vm, ok := v.(map[string]any); ok && vm["name"] == supervisor.LiveVolume {
			return nil
		}
	}
	spec["volumes"] = append(volumes, map[string]any{"name": supervisor.LiveVolume, "emptyDir": map[string]any{}})
	return nil
}
