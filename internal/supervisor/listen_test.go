package supervisor

import (
	"net"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
)

// The socket's path appears only once it accepts connections, replaces a
// previous container's socket, and goes when the supervisor closes it.
func TestListenAtPublishesAListeningSocket(t *testing.T) {
	g := NewWithT(t)
	path := filepath.Join(t.TempDir(), SocketName)
	g.Expect(os.WriteFile(path, []byte("a previous container's socket"), 0o600)).To(Succeed())

	l, err := listenAt(path)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(filepath.Join(filepath.Dir(path), stagingSocketName)).NotTo(BeAnExistingFile())
	info, err := os.Lstat(path)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(info.Mode() & os.ModeSocket).NotTo(BeZero())

	accepted := make(chan error, 1)
	go func() {
		c, err := l.Accept()
		if err == nil {
			c.Close()
		}
		accepted <- err
	}()
	c, err := net.Dial("unix", path)
	g.Expect(err).NotTo(HaveOccurred())
	c.Close()
	g.Expect(<-accepted).To(Succeed())

	g.Expect(l.Close()).To(Succeed())
	g.Expect(path).NotTo(BeAnExistingFile())
}
