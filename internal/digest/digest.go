// Package digest names content by hash: the change detection every
// engine shares (an image's inputs, a release's rendered inputs, a
// source's spec).
package digest

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
)

// JSON is the hex sha256 of a value's JSON form.
func JSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		// Spec types always marshal; a failure here is a programming error
		// and must not silently collide with another hash.
		panic(fmt.Sprintf("hashing %T: %v", v, err))
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
