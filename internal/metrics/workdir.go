package metrics

import (
	"context"
	"io/fs"
	"path/filepath"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// WorkDirBytes is the size of what the operator keeps on disk, by part of
// its work directory (sources, charts, base-layers, ...).
var WorkDirBytes = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "devloop_workdir_bytes",
	Help: "Bytes of regular files under each top-level directory of the operator's --work-dir.",
}, []string{"dir"})

func init() {
	crmetrics.Registry.MustRegister(WorkDirBytes)
}

// DirBytes is the total size of the regular files under root; what
// cannot be read is skipped (a GC may remove files during the walk).
func DirBytes(root string) int64 {
	var n int64
	_ = filepath.WalkDir(root, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if d.Type().IsRegular() {
			if info, err := d.Info(); err == nil {
				n += info.Size()
			}
		}
		return nil
	})
	return n
}

// MeasureWorkDir sets WorkDirBytes for each directory under root now.
func MeasureWorkDir(root string) {
	entries, err := filepath.Glob(filepath.Join(root, "*"))
	if err != nil {
		return
	}
	for _, e := range entries {
		WorkDirBytes.WithLabelValues(filepath.Base(e)).Set(float64(DirBytes(e)))
	}
}

// WorkDirSampler is a manager.Runnable that measures the work directory
// every Interval until the manager stops: a walk, not a hook in every
// writer, so the figure stays right whatever writes there.
type WorkDirSampler struct {
	Root     string
	Interval time.Duration
}

// Start measures at once, then every Interval (a minute when zero).
func (s WorkDirSampler) Start(ctx context.Context) error {
	interval := s.Interval
	if interval <= 0 {
		interval = time.Minute
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		MeasureWorkDir(s.Root)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}
