package poll

import (
	"context"
	"strings"

	"github.com/onsi/gomega"
)

// failedAssertion carries the first failed assertion's message out of a
// check, as Gomega's Eventually carries it: by panicking.
type failedAssertion struct{ message string }

// Assertions runs check, whose Gomega assertions stop it at the first
// failure as in Eventually(func(g Gomega) {...}), and returns that
// failure's message (the first line of it, which says what was seen) and
// whether every assertion held. A panic other than a failed assertion is
// not caught.
func Assertions(check func(g gomega.Gomega)) (failure string, ok bool) {
	defer func() {
		if r := recover(); r != nil {
			f, isFailure := r.(failedAssertion)
			if !isFailure {
				panic(r)
			}
			failure, ok = f.message, false
		}
	}()
	g := gomega.NewGomega(func(message string, _ ...int) { panic(failedAssertion{message: oneLine(message)}) })
	check(g)
	return "", true
}

// Check is a Probe of Gomega assertions.
func Check(check func(g gomega.Gomega)) Probe {
	return func(context.Context) (string, bool, error) {
		failure, ok := Assertions(check)
		return failure, ok, nil
	}
}

// oneLine folds a Gomega message (the optional description, "Expected",
// the actual value, the matcher, the expected value, on lines of their
// own) onto one line for a failure message of a wait.
func oneLine(message string) string {
	return strings.Join(strings.Fields(message), " ")
}

// Succeeds is a Probe of an attempt (a patch that may conflict): ok once
// it returns no error, the error being what was seen until then.
func Succeeds(attempt func(ctx context.Context) error) Probe {
	return func(ctx context.Context) (string, bool, error) {
		if err := attempt(ctx); err != nil {
			return err.Error(), false, nil
		}
		return "done", true, nil
	}
}
