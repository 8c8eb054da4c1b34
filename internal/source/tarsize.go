package source

// A tar is built into a buffer in several places (a push's layers, the
// layers of binaries an image copies, a live update's sync). Growing the
// buffer by doubling while a binary of tens of MiB is written into it
// clears and copies it again and again and leaves twice the binary behind
// as garbage; the buffer is grown once, to about the tar's size.

// tarBlock is the tar format's block size.
const tarBlock = 512

// TarEnd is the two zero blocks that end a tar.
const TarEnd = 2 * tarBlock

// TarEntrySize is about what one entry takes in a tar: its header, a PAX
// header too for a name (or link target) of nameLen bytes past the
// format's 100, and size bytes of content padded to blocks.
func TarEntrySize(nameLen int, size int64) int {
	n := tarBlock + int((size+tarBlock-1)/tarBlock*tarBlock)
	if nameLen > 100 {
		n += 3 * tarBlock
	}
	return n
}
