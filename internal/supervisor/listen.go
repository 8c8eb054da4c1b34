package supervisor

import (
	"net"
	"os"
	"path/filepath"
)

// listenAt listens on the Unix socket at path so that the path appears only
// once it accepts connections. Binding creates the file before listen(2)
// runs, and a sync that sees the file in between is refused; so the socket
// is bound under a temporary name and renamed into place once listening.
// A restarted container finds its previous socket in the emptyDir: the
// rename replaces it.
func listenAt(path string) (net.Listener, error) {
	staging := filepath.Join(filepath.Dir(path), stagingSocketName)
	_ = os.Remove(staging)
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: staging, Net: "unix"})
	if err != nil {
		return nil, err
	}
	// The name it was bound under is gone after the rename; removing the
	// socket is listenAt's caller's close, below.
	l.SetUnlinkOnClose(false)
	if err := os.Rename(staging, path); err != nil {
		_ = l.Close()
		_ = os.Remove(staging)
		return nil, err
	}
	return &removedOnClose{UnixListener: l, path: path}, nil
}

// removedOnClose is a listener whose socket file goes with it.
type removedOnClose struct {
	*net.UnixListener
	path string
}

func (l *removedOnClose) Close() error {
	err := l.UnixListener.Close()
	_ = os.Remove(l.path)
	return err
}
