package helm

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"

	"helm.sh/helm/v3/pkg/chart"
)

// cached loads the archive stored for origin, url and digest, or fetches
// and stores it. Without a digest nothing identifies the content, so it
// is fetched every time.
//
// origin is what the tenant's access was checked against before this
// call: the repository whose index.yaml (downloaded with the tenant's
// credentials on every load) listed the archive, or the OCI reference
// resolved with them. The cache is shared by every environment, and an
// index can list any URL with any digest: keyed by URL and digest alone,
// tenant B's index naming tenant A's private archive would be served A's
// cached copy. Keyed by origin too, B's index leads to B's own download
// of that URL, with B's credentials.
func (l *ChartLoader) cached(origin, url, digest string, fetch func() ([]byte, error)) (*chart.Chart, error) {
	var file string
	if digest != "" && l.CacheDir != "" {
		key := sha256.Sum256([]byte(origin + "\x00" + url + "\x00" + digest))
		file = filepath.Join(l.CacheDir, hex.EncodeToString(key[:])+".tgz")
		if data, err := readCapped(file, l.maxChart()); err == nil {
			return loadArchive(url, data)
		}
	}
	data, err := fetch()
	if err != nil {
		return nil, err
	}
	ch, err := loadArchive(url, data)
	if err != nil {
		return nil, err
	}
	if file != "" {
		// Write then rename: a reader never sees half an archive.
		if err := os.MkdirAll(l.CacheDir, 0o755); err == nil {
			tmp, err := os.CreateTemp(l.CacheDir, ".chart-*")
			if err == nil {
				_, werr := tmp.Write(data)
				if cerr := tmp.Close(); werr == nil && cerr == nil {
					_ = os.Rename(tmp.Name(), file)
				}
				_ = os.Remove(tmp.Name())
			}
		}
	}
	return ch, nil
}

// readCapped reads a cached archive no larger than max: only archives
// within the cap are written, so a larger file is not one of them.
func readCapped(file string, max int64) ([]byte, error) {
	fi, err := os.Stat(file)
	if err != nil {
		return nil, err
	}
	if fi.Size() > max {
		return nil, os.ErrInvalid
	}
	return os.ReadFile(file)
}
