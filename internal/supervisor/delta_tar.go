package supervisor

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"
)

// A delta frame (Frame.Delta) carries DeltaMagic, then a sync's tar whose
// regular files may be deltas (delta.go) against the files the live root
// holds: such an entry has DeltaSumRecord (the SHA-256 of the file it
// makes, hex) and DeltaSizeRecord (its size) among its PAX records, and
// the ops as its content. A supervisor that knows no deltas ignores the
// frame's field and reads the magic as a tar header, which it refuses
// before writing anything: the operator then sends the tar whole.
const (
	DeltaMagic      = "devloop-sync-delta-1\n"
	DeltaSumRecord  = "DEVLOOP.delta.sha256"
	DeltaSizeRecord = "DEVLOOP.delta.size"
)

// DeltaTar is the body of a delta frame that makes next (a sync's tar,
// as WriteTar makes it) in a live root where base (the tar synced there
// last) was applied: each regular file of next that base also carried is
// sent as a delta against it when that is much smaller. It returns false
// when no file is (then next is sent whole).
func DeltaTar(base, next []byte) ([]byte, bool, error) {
	prev, err := regularFiles(base)
	if err != nil {
		return nil, false, err
	}
	var out bytes.Buffer
	out.WriteString(DeltaMagic)
	tw := tar.NewWriter(&out)
	tr, at := entries(next)
	deltas := 0
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, false, err
		}
		body, err := at(h)
		if err != nil {
			return nil, false, err
		}
		if old, ok := prev[h.Name]; ok && h.Typeflag == tar.TypeReg {
			if ops, ok := EncodeDelta(old, body); ok {
				sum := sha256.Sum256(body)
				d := *h
				d.Format = tar.FormatPAX
				d.PAXRecords = map[string]string{DeltaSumRecord: hex.EncodeToString(sum[:]), DeltaSizeRecord: strconv.Itoa(len(body))}
				d.Size = int64(len(ops))
				h, body = &d, ops
				deltas++
			}
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, false, err
		}
		if _, err := tw.Write(body); err != nil {
			return nil, false, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, false, err
	}
	return out.Bytes(), deltas > 0, nil
}

// regularFiles are the regular files of a sync's tar by entry name (their
// contents in place in tarball).
func regularFiles(tarball []byte) (map[string][]byte, error) {
	files := map[string][]byte{}
	tr, at := entries(tarball)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files, nil
		}
		if err != nil {
			return nil, err
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		if files[h.Name], err = at(h); err != nil {
			return nil, err
		}
	}
}

// entries reads a tar held in memory; at is the content of the entry
// Next just returned, in place in tarball (no copy of a 5 MiB binary
// per sync): an uncompressed tar's reader has read exactly the entry's
// header blocks when Next returns, so its content starts where the
// reader stands.
func entries(tarball []byte) (*tar.Reader, func(*tar.Header) ([]byte, error)) {
	r := bytes.NewReader(tarball)
	tr := tar.NewReader(r)
	return tr, func(h *tar.Header) ([]byte, error) {
		start := len(tarball) - r.Len()
		if h.Size < 0 || int64(start)+h.Size > int64(len(tarball)) {
			return nil, io.ErrUnexpectedEOF
		}
		return tarball[start : start+int(h.Size)], nil
	}
}

// readDeltaMagic reads a delta frame's magic off its body.
func readDeltaMagic(r io.Reader) error {
	b := make([]byte, len(DeltaMagic))
	if _, err := io.ReadFull(r, b); err != nil || string(b) != DeltaMagic {
		return errors.New("a delta frame without its magic")
	}
	return nil
}

// writeDeltaFile writes the file the delta in r makes from the regular
// file at rel (never a link: the image's originals are not a base)
// through a temporary file renamed into place, only once its size and
// SHA-256 are those the sender meant.
func writeDeltaFile(root *os.Root, rel string, mode fs.FileMode, r io.Reader, n int, pax map[string]string) error {
	size, err := strconv.ParseInt(pax[DeltaSizeRecord], 10, 64)
	if err != nil || size < 0 {
		return fmt.Errorf("delta: size %q", pax[DeltaSizeRecord])
	}
	st, err := root.Lstat(rel)
	if err != nil || !st.Mode().IsRegular() {
		return errDeltaBase
	}
	base, err := root.Open(rel)
	if err != nil {
		return err
	}
	defer base.Close()
	return replaceFile(root, rel, mode, n, func(f io.Writer) error {
		return applyDelta(base, st.Size(), r, f, size, pax[DeltaSumRecord])
	})
}
