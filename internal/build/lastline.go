package build

import (
	"strings"

	"github.com/devloop-dev/devloop/internal/message"
	"github.com/devloop-dev/devloop/internal/teamcache"
)

// lastBuildLine is the line of a build's log tail a failed build's
// message quotes: the last one the build command wrote, not the build
// cache program's summary printed after it when the go command exits.
func lastBuildLine(tail string) string {
	lines := strings.Split(strings.TrimSpace(tail), "\n")
	for len(lines) > 1 && strings.HasPrefix(strings.TrimSpace(lines[len(lines)-1]), teamcache.LogPrefix) {
		lines = lines[:len(lines)-1]
	}
	return message.LastLine(strings.Join(lines, "\n"))
}
