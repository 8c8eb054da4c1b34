//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The benchmark's laptop across a shaped link (issue 46): with
// DEVLOOP_BENCH_LINK set to hack/link/link.sh's directory (`make link-up
// LINK=home` prints it), everything the laptop side does (the local go
// build, the plugin, Tilt and the image push of its custom_build) runs in
// the link's network namespace, so every byte it sends to the API server
// and the registry crosses the link's rate limits and round trip; the
// Service is still polled from this machine, the same for both arms.

// linkDir is link.sh's directory, or "" for this machine's own network.
func linkDir() string { return os.Getenv("DEVLOOP_BENCH_LINK") }

// onLaptop is cmd run on the laptop's side of the link (unchanged without
// a link). Call it on a fresh exec.Command, before setting its fields.
func onLaptop(cmd *exec.Cmd) *exec.Cmd {
	dir := linkDir()
	if dir == "" {
		return cmd
	}
	return exec.Command("nsenter", append([]string{"--net=" + filepath.Join(dir, "netns"), "--", cmd.Path}, cmd.Args[1:]...)...)
}

// laptopKubeconfig is the kubeconfig of the laptop's side: the API server
// by an address that crosses the link.
func laptopKubeconfig(t *testing.T) string {
	if dir := linkDir(); dir != "" {
		return filepath.Join(dir, "kubeconfig")
	}
	return need(t).Kubeconfig
}

// linkProfile is what the link is ("20:100:40": Mbit/s up, down, round
// trip in ms), or "none".
func linkProfile() string {
	if dir := linkDir(); dir != "" {
		if b, err := os.ReadFile(filepath.Join(dir, "profile")); err == nil {
			return strings.TrimSpace(string(b))
		}
	}
	return "none"
}

// sentFromLaptop is how many bytes the laptop has sent over the link so
// far (the host's end received them), 0 without a link.
func sentFromLaptop() int64 {
	if linkDir() == "" {
		return 0
	}
	b, err := os.ReadFile("/sys/class/net/dlink-host/statistics/rx_bytes")
	if err != nil {
		return 0
	}
	n, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	return n
}

// kib formats bytes for a log line.
func kib(n int64) string { return fmt.Sprintf("%.1f KiB", float64(n)/1024) }
