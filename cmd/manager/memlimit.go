package main

import (
	"os"
	"runtime/debug"
	"strconv"

	"github.com/go-logr/logr"
)

// memoryLimitEnv carries the container's memory limit in bytes (the
// chart sets it from limits.memory).
const memoryLimitEnv = "DEVLOOP_MEMORY_LIMIT"

// softMemoryLimit is the Go runtime's soft memory limit for a container
// limited to limit bytes. The limit itself as GOMEMLIMIT leaves nothing for
// what the runtime does not count (the binary's mapped pages, the page
// cache of files the store writes): the operator was OOM-killed twice in
// the remote benchmark with 512 MiB, its anonymous memory at 520 MiB. A
// sixth of the limit stays free, at least 64 MiB (all of a small limit).
func softMemoryLimit(limit int64) int64 {
	headroom := max(limit/6, 64<<20)
	return max(limit-headroom, limit/2)
}

// setMemoryLimit applies softMemoryLimit of DEVLOOP_MEMORY_LIMIT unless
// GOMEMLIMIT says otherwise.
func setMemoryLimit(log logr.Logger) {
	if os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	limit, err := strconv.ParseInt(os.Getenv(memoryLimitEnv), 10, 64)
	if err != nil || limit <= 0 {
		return
	}
	soft := softMemoryLimit(limit)
	debug.SetMemoryLimit(soft)
	log.Info("Go memory limit set below the container's", "limitBytes", limit, "softLimitBytes", soft)
}
