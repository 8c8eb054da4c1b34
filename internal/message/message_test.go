package message

import "testing"

func TestCondense(t *testing.T) {
	cases := map[string]string{
		"plain": "plain",
		"helm install c: 1 error occurred:\n\t* job c-hook failed: BackoffLimitExceeded\n\n": "helm install c: 1 error occurred: job c-hook failed: BackoffLimitExceeded",
		"2 errors occurred:\n\t* a\n\t* b":                                                   "2 errors occurred: a; b",
		"first\nsecond":                                                                      "first; second",
	}
	for in, want := range cases {
		if got := Condense(in); got != want {
			t.Errorf("Condense(%q) = %q, want %q", in, got, want)
		}
	}
}
