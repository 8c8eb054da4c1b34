package supervisor

import (
	"fmt"
	"path"
	"strings"
)

const (
	// Path is where the build puts the supervisor in a live-updatable
	// image; the pod's command starts it there.
	Path = "/.devloop/supervisor"
	// LiveRoot is where synced files live in the container: the mount
	// point of the LiveVolume emptyDir.
	LiveRoot = "/.devloop/live"
	// OrigDir is where the build keeps the image's own files of its live
	// paths, each live path itself being a symlink to LiveRoot/<path>: the
	// supervisor seeds LiveRoot with links to them when the pod starts.
	OrigDir = "/.devloop/orig"
	// LiveVolume is the name of the pod's emptyDir volume mounted at
	// LiveRoot.
	LiveVolume = "devloop-live"
	// LiveRootEnv names, in the program's environment, the directory under
	// which synced files are: a program reads a live-updated data file at
	// $DEVLOOP_LIVE_ROOT/<image path>, falling back to the image path.
	LiveRootEnv = "DEVLOOP_LIVE_ROOT"

	// SocketName, DigestName, lockName and manifestName (the paths the
	// last sync wrote) are the supervisor's own files
	// in LiveRoot. Their names start with a dot and are refused as sync
	// targets at the top level, so no image path can overwrite them.
	SocketName   = ".supervisor.sock"
	DigestName   = ".digest"
	lockName     = ".sync.lock"
	manifestName = ".synced"
	// stagingSocketName is where the socket is bound before it listens
	// (listenAt).
	stagingSocketName = SocketName + ".new"
)

// cleanImagePath turns a path as a tar entry or program names it ("/app/x",
// "app/x", "./app/x") into a relative, slash-separated path under the live
// root ("app/x"). It refuses paths that leave the root, the root itself
// and the supervisor's own files.
func cleanImagePath(name string) (string, error) {
	p := path.Clean("/" + name)
	if p == "/" {
		return "", fmt.Errorf("%q names the root, not a file", name)
	}
	if strings.Contains(name, "\x00") {
		return "", fmt.Errorf("%q holds a NUL byte", name)
	}
	rel := strings.TrimPrefix(p, "/")
	switch rel {
	case SocketName, stagingSocketName, DigestName, lockName, manifestName:
		return "", fmt.Errorf("%q is the supervisor's own file", name)
	}
	// Clean of an absolute path cannot climb above "/", so a "../" in the
	// entry stays inside; refuse it anyway, since a layer never holds one
	// and it is more likely a mistake than meant.
	for _, part := range strings.Split(name, "/") {
		if part == ".." {
			return "", fmt.Errorf("%q climbs with ..", name)
		}
	}
	return rel, nil
}
