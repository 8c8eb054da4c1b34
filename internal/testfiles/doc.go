// Package testfiles writes the file trees tests start from and reads back
// the tar streams (image layers, packed sources, live updates) they check,
// so each test package does not carry its own copy of the same loops.
package testfiles
