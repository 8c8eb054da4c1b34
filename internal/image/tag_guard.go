package image

import "context"

// TagGuard decides whether a push may move tag away from the digest it
// names now (from), one this build did not produce: nil allows it, an
// error refuses the whole push before any tag moves.
type TagGuard func(tag, from string) error

type tagGuardKey struct{}

// WithTagGuard carries guard in ctx for the pushes made with it: the
// build engine's rule of who may move a tag is per environment and
// image, while the Builder is shared by a reconcile's images.
func WithTagGuard(ctx context.Context, guard TagGuard) context.Context {
	return context.WithValue(ctx, tagGuardKey{}, guard)
}

// checkTagMoves asks ctx's guard about each tag a push would move away
// from another digest.
func checkTagMoves(ctx context.Context, state pushState) error {
	guard, _ := ctx.Value(tagGuardKey{}).(TagGuard)
	if guard == nil {
		return nil
	}
	for _, tag := range state.tagsToMove {
		if from := state.previous[tag]; from != "" {
			if err := guard(tag, from); err != nil {
				return err
			}
		}
	}
	return nil
}
