package helm

import (
	"fmt"
	"io/fs"
	"path"
)

// ChartFileReader reads a file of a loaded chart by its path inside the
// chart (values.yaml, ci/dev-values.yaml, ...); a file larger than max
// bytes is an error.
func ChartFileReader(ch *Chart, max int) func(string) ([]byte, error) {
	return func(p string) ([]byte, error) {
		p = path.Clean(p)
		if ch != nil {
			for _, f := range ch.Raw {
				if f.Name == p {
					if len(f.Data) > max {
						return nil, fmt.Errorf("larger than %d bytes", max)
					}
					return f.Data, nil
				}
			}
		}
		return nil, fs.ErrNotExist
	}
}
