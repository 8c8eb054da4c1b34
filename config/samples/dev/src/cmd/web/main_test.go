package main

import "testing"

func TestGreeting(t *testing.T) {
	if greeting == "" {
		t.Fatal("empty greeting")
	}
}
