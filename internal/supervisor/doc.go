// Package supervisor is the in-container side of live update: the
// supervisor that wraps a live-updatable image's program, and the sync
// command the operator execs next to it to deliver changed files. Both
// are one small static binary (cmd/supervisor, built per platform and
// shipped in the operator image under build.SupervisorDir), put at Path
// by the build, so scratch and distroless images need no shell or tar.
// It imports nothing but the standard library: it starts in a few
// milliseconds, which every sync pays.
//
// Files: a sync writes each changed file at LiveRoot + its image path (an
// emptyDir, writable whatever the pod's UID, so the restricted Pod Security
// profile and readOnlyRootFilesystem both hold), atomically (temp file and
// rename), and records the digest it brought in LiveRoot/.digest. The
// supervisor runs the program's synced copy when there is one, else the
// image's. It then tells the supervisor over a unix socket
// (LiveRoot/.supervisor.sock) to do the image's after-action: restart the
// program, run a command, or nothing.
//
// Start gate: a fresh pod's supervisor waits for the operator's first sync
// (files or an empty tar, "you are current") or GateTimeout before it
// starts the program, so a pod created after several live updates starts
// with the latest files rather than the image's. A container restarted in
// a pod that was synced before starts at once: the emptyDir keeps the
// synced files and the digest, and the operator records on the pod what it
// delivered.
//
// Process handling: the supervisor is PID 1 of its container. It forwards
// termination signals to the program's process group, reaps every zombie
// reparented to it, passes stdout and stderr through, and exits with the
// program's exit code when the program exits on its own, so a crash is a
// container restart reported like any other.

package supervisor
