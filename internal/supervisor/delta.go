package supervisor

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
)

// A delta carries a file as changes to the version the container already
// has (what the previous sync over the same session wrote): ranges of
// that file to copy, and the bytes that are new. A rebuilt binary is
// mostly the previous one, often at the same offsets (a version string
// changed) or shifted (code added); sending the difference instead of
// the whole file is what makes a live update's sync small (issue 33).
//
// The encoding is a sequence of ops, each an op byte and uvarints:
//
//	'C' offset length   copy length bytes of the base from offset
//	'L' length bytes    these length bytes
//
// The result is checked against the SHA-256 the sender computed from the
// file it meant, so a base that is not what the sender thought (changed
// by hand, or an older sync) is refused, never written.
const (
	opCopy    = 'C'
	opLiteral = 'L'
)

// deltaBlock is the length of the blocks of the base looked up in the
// new file; a match is then extended both ways byte by byte.
const deltaBlock = 512

// minRun is the shortest run of equal bytes at the current shift taken
// as a copy when a match ends (shorter ones go in the literal).
const minRun = 16

// resyncWindow is how far past the end of a match the same shift is
// tried again: code after an edit differs in scattered bytes (changed
// call offsets) between long equal runs.
const resyncWindow = 256

// EncodeDelta returns the ops that make next from base, and false when
// they would not be less than half of next (then next is sent whole).
// The blocks of base are indexed only when next does not follow base at
// the same offsets (a rebuilt binary often does, but for a few bytes).
func EncodeDelta(base, next []byte) ([]byte, bool) {
	if len(base) < deltaBlock || len(next) < deltaBlock || len(base) > math.MaxInt32 {
		return nil, false
	}
	var index map[uint32]int32
	var out bytes.Buffer
	e := &deltaWriter{out: &out}
	lit, i := 0, 0 // lit: start of the bytes not yet emitted
	if bytes.Equal(next[:minRun], base[:minRun]) {
		i, lit = e.copyAlong(base, next, 0, 0)
	}
	var h uint32
	if i+deltaBlock <= len(next) {
		h = rollingSum(next[i : i+deltaBlock])
	}
	for i+deltaBlock <= len(next) {
		if index == nil {
			index = blockIndex(base)
		}
		if off, ok := index[h]; ok && bytes.Equal(base[off:int(off)+deltaBlock], next[i:i+deltaBlock]) {
			b := int(off)
			for i > lit && b > 0 && next[i-1] == base[b-1] {
				i--
				b--
			}
			e.literal(next[lit:i])
			i, lit = e.copyAlong(base, next, b, i)
			if len(out.Bytes()) >= len(next)/2 {
				return nil, false
			}
			if i+deltaBlock <= len(next) {
				h = rollingSum(next[i : i+deltaBlock])
			}
			continue
		}
		if i-lit > len(next)/2 {
			// Half of it new already: stop looking (unrelated content
			// costs no more than this).
			return nil, false
		}
		if i+deltaBlock < len(next) {
			h = roll(h, next[i], next[i+deltaBlock])
		}
		i++
	}
	e.literal(next[lit:])
	if out.Len() >= len(next)/2 {
		return nil, false
	}
	return out.Bytes(), true
}

// blockIndex maps the rolling sums of base's blocks to their offsets.
func blockIndex(base []byte) map[uint32]int32 {
	index := make(map[uint32]int32, len(base)/deltaBlock)
	for off := 0; off+deltaBlock <= len(base); off += deltaBlock {
		h := rollingSum(base[off : off+deltaBlock])
		if _, ok := index[h]; !ok {
			index[h] = int32(off)
		}
	}
	return index
}

// equalRun is how many bytes a and b have equal from their start, found
// a chunk at a time (bytes.Equal is vectorized), then byte by byte.
func equalRun(a, b []byte) int {
	n := min(len(a), len(b))
	const chunk = 256
	i := 0
	for i+chunk <= n && bytes.Equal(a[i:i+chunk], b[i:i+chunk]) {
		i += chunk
	}
	for i < n && a[i] == b[i] {
		i++
	}
	return i
}

// deltaWriter writes ops.
type deltaWriter struct {
	out *bytes.Buffer
	buf [2 * binary.MaxVarintLen64]byte
}

func (w *deltaWriter) literal(b []byte) {
	if len(b) == 0 {
		return
	}
	w.out.WriteByte(opLiteral)
	w.out.Write(binary.AppendUvarint(w.buf[:0], uint64(len(b))))
	w.out.Write(b)
}

func (w *deltaWriter) copy(off, n int) {
	w.out.WriteByte(opCopy)
	b := binary.AppendUvarint(w.buf[:0], uint64(off))
	w.out.Write(binary.AppendUvarint(b, uint64(n)))
}

// copyAlong emits the match of next[i:] at base[b:], and the matches at
// the same shift that follow it past a few differing bytes; it returns
// where the matching stopped (i) and the start of the bytes not emitted
// (lit).
func (w *deltaWriter) copyAlong(base, next []byte, b, i int) (int, int) {
	shift := b - i
	for {
		j := i + equalRun(next[i:], base[i+shift:])
		w.copy(i+shift, j-i)
		// A few differing bytes, then the same shift again?
		k := j + 1
		for ; k < j+resyncWindow && k+minRun <= len(next) && k+shift+minRun <= len(base); k++ {
			if bytes.Equal(next[k:k+minRun], base[k+shift:k+shift+minRun]) {
				break
			}
		}
		if k >= j+resyncWindow || k+minRun > len(next) || k+shift+minRun > len(base) {
			return j, j
		}
		w.literal(next[j:k])
		i = k
	}
}

// rollingSum is a polynomial hash of a block (mod 2^32), rolled by roll.
func rollingSum(b []byte) uint32 {
	var h uint32
	for _, c := range b {
		h = h*rollPrime + uint32(c)
	}
	return h
}

const rollPrime = 16777619

// rollOut is rollPrime^deltaBlock: what the byte leaving the window
// weighs once the window moved on.
var rollOut = func() uint32 {
	p := uint32(1)
	for range deltaBlock {
		p *= rollPrime
	}
	return p
}()

func roll(h uint32, out, in byte) uint32 {
	return h*rollPrime + uint32(in) - rollOut*uint32(out)
}

// errDeltaBase is a delta whose result is not the file its sender meant:
// the base here is not the one it was made against.
var errDeltaBase = errors.New("delta: the file here is not the one the delta was made against")

// applyDelta writes to w the file the ops in r make from base, which must
// come to size bytes with the SHA-256 sum (hex).
func applyDelta(base io.ReaderAt, baseSize int64, r io.Reader, w io.Writer, size int64, sum string) error {
	br := bufio.NewReader(r)
	h := sha256.New()
	out := io.MultiWriter(w, h)
	var written int64
	for {
		op, err := br.ReadByte()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		switch op {
		case opCopy:
			off, err1 := binary.ReadUvarint(br)
			n, err2 := binary.ReadUvarint(br)
			if err := errors.Join(err1, err2); err != nil {
				return fmt.Errorf("delta: a copy: %w", err)
			}
			if off > uint64(baseSize) || n > uint64(baseSize)-off || written+int64(n) > size {
				return errDeltaBase
			}
			if _, err := io.Copy(out, io.NewSectionReader(base, int64(off), int64(n))); err != nil {
				return err
			}
			written += int64(n)
		case opLiteral:
			n, err := binary.ReadUvarint(br)
			if err != nil {
				return fmt.Errorf("delta: a literal: %w", err)
			}
			if written+int64(n) > size {
				return fmt.Errorf("delta: longer than its %d bytes", size)
			}
			if _, err := io.CopyN(out, br, int64(n)); err != nil {
				return fmt.Errorf("delta: a literal: %w", err)
			}
			written += int64(n)
		default:
			return fmt.Errorf("delta: unknown op %q", op)
		}
	}
	if written != size || hex.EncodeToString(h.Sum(nil)) != sum {
		return errDeltaBase
	}
	return nil
}

// ApplyDelta writes to w the file the ops in r (EncodeDelta's) make from
// base, which must come to size bytes with the SHA-256 sum (hex): a source
// push's binary sent as a delta (internal/source) is made whole with it.
func ApplyDelta(base io.ReaderAt, baseSize int64, r io.Reader, w io.Writer, size int64, sum string) error {
	return applyDelta(base, baseSize, r, w, size, sum)
}
