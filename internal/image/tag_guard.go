package image

import (
	"context"
	"errors"
)

// TagGuard decides whether a push may move tag away from the digest it
// names now (from), one this build did not produce, to the pushed digest
// (to): nil allows it, ErrLeaveTag leaves that tag where it is while the
// rest of the push goes on, any other error refuses the whole push before
// any tag moves.
type TagGuard func(tag, from, to string) error

// ErrLeaveTag is a TagGuard's answer for a tag that stays on the digest it
// names: the repository is shared and the tag already names an image of
// the same content, or one another environment pushed since.
var ErrLeaveTag = errors.New("tag left where it is")

type tagGuardKey struct{}

// WithTagGuard carries guard in ctx for the pushes made with it: the
// build engine's rule of who may move a tag is per environment and
// image, while the Builder is shared by a reconcile's images.
func WithTagGuard(ctx context.Context, guard TagGuard) context.Context {
	return context.WithValue(ctx, tagGuardKey{}, guard)
}

// checkTagMoves asks ctx's guard about each tag a push of digest would
// move away from another digest, and returns the tags to move: those left
// where they are (ErrLeaveTag) are dropped from state.
func checkTagMoves(ctx context.Context, state *pushState, digest string) error {
	guard, _ := ctx.Value(tagGuardKey{}).(TagGuard)
	if guard == nil {
		return nil
	}
	move := state.tagsToMove[:0:0]
	for _, tag := range state.tagsToMove {
		from := state.previous[tag]
		if from == "" {
			move = append(move, tag)
			continue
		}
		switch err := guard(tag, from, digest); {
		case errors.Is(err, ErrLeaveTag):
			delete(state.previous, tag)
		case err != nil:
			return err
		default:
			move = append(move, tag)
		}
	}
	state.tagsToMove = move
	return nil
}
