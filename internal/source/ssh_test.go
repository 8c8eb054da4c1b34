package source

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/binary"
	"encoding/pem"
	"errors"
	"net"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	gossh "golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/devloop-dev/devloop/api/v1alpha1"
)

func newKey(t *testing.T) (gossh.Signer, []byte) {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := gossh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	block, err := gossh.MarshalPrivateKey(priv, "")
	if err != nil {
		t.Fatal(err)
	}
	return signer, pem.EncodeToMemory(block)
}

// sshGitServer is a minimal git-over-SSH server: it accepts one client key
// and runs git-upload-pack for exec requests, as sshd with git-shell does.
func sshGitServer(t *testing.T, hostKey gossh.Signer, clientKey gossh.PublicKey) string {
	t.Helper()
	needGit(t)
	cfg := &gossh.ServerConfig{
		PublicKeyCallback: func(_ gossh.ConnMetadata, key gossh.PublicKey) (*gossh.Permissions, error) {
			if bytes.Equal(key.Marshal(), clientKey.Marshal()) {
				return nil, nil
			}
			return nil, errors.New("unknown key")
		},
	}
	cfg.AddHostKey(hostKey)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go serveSSH(conn, cfg)
		}
	}()
	return ln.Addr().String()
}

func serveSSH(conn net.Conn, cfg *gossh.ServerConfig) {
	defer func() { _ = conn.Close() }()
	_, chans, reqs, err := gossh.NewServerConn(conn, cfg)
	if err != nil {
		return
	}
	go gossh.DiscardRequests(reqs)
	for nc := range chans {
		if nc.ChannelType() != "session" {
			_ = nc.Reject(gossh.UnknownChannelType, "session only")
			continue
		}
		ch, chReqs, err := nc.Accept()
		if err != nil {
			return
		}
		go func() {
			defer func() { _ = ch.Close() }()
			for req := range chReqs {
				if req.Type != "exec" || len(req.Payload) < 4 {
					_ = req.Reply(false, nil)
					continue
				}
				command := string(req.Payload[4:])
				bin, arg, _ := strings.Cut(command, " ")
				if bin != "git-upload-pack" {
					_ = req.Reply(false, nil)
					continue
				}
				_ = req.Reply(true, nil)
				cmd := exec.Command("git", "upload-pack", strings.Trim(arg, "'"))
				cmd.Stdin, cmd.Stdout, cmd.Stderr = ch, ch, ch.Stderr()
				status := uint32(0)
				if err := cmd.Run(); err != nil {
					status = 1
				}
				_ = ch.CloseWrite()
				var payload [4]byte
				binary.BigEndian.PutUint32(payload[:], status)
				_, _ = ch.SendRequest("exit-status", false, payload[:])
				return
			}
		}()
	}
}

func TestGitOverSSH(t *testing.T) {
	r := newGitRepo(t)
	hostKey, _ := newKey(t)
	otherHost, _ := newKey(t)
	client, clientPEM := newKey(t)
	stranger, strangerPEM := newKey(t)
	_ = stranger
	addr := sshGitServer(t, hostKey, client.PublicKey())
	url := "ssh://git@" + addr + r.dir
	knownHosts := knownhosts.Line([]string{knownhosts.Normalize(addr)}, hostKey.PublicKey()) + "\n"
	wrongHosts := knownhosts.Line([]string{knownhosts.Normalize(addr)}, otherHost.PublicKey()) + "\n"

	f := newFetcher(t,
		secret("ssh", map[string]string{"identity": string(clientPEM), "known_hosts": knownHosts}),
		secret("wrong-host", map[string]string{"identity": string(clientPEM), "known_hosts": wrongHosts}),
		secret("stranger", map[string]string{"identity": string(strangerPEM), "known_hosts": knownHosts}),
		secret("no-known-hosts", map[string]string{"identity": string(clientPEM)}),
	)
	src := func(secretName string) v1alpha1.Source {
		return withSecret(gitSource(url, &v1alpha1.GitRef{Branch: "dev"}), secretName)
	}
	ctx := context.Background()

	t.Run("resolve and fetch", func(t *testing.T) {
		ref, err := f.Resolve(ctx, testNamespace, src("ssh"))
		if err != nil {
			t.Fatal(err)
		}
		if ref.Commit != r.c2 {
			t.Errorf("commit %s, want %s", ref.Commit, r.c2)
		}
		a := fetchWithCredentials(t, f, ref, src("ssh"))
		if got := readFile(t, filepath.Join(a.Dir, "a.txt")); got != "two" {
			t.Errorf("a.txt = %q", got)
		}
	})
	errorCases := []struct {
		name, secret string
		want         []string
	}{
		{"host key not in known_hosts", "wrong-host", []string{"host key verification failed"}},
		{"identity the server refuses", "stranger", []string{"SSH authentication failed"}},
		{"no known_hosts", "no-known-hosts", []string{`secret "no-known-hosts"`, "known_hosts", "refused"}},
		{"no secret at all", "", []string{"identity", "known_hosts"}},
	}
	for _, tt := range errorCases {
		t.Run(tt.name, func(t *testing.T) {
			_, err := f.Resolve(ctx, testNamespace, src(tt.secret))
			expectError(t, err, permanent, append([]string{`source "app": git ssh://`}, tt.want...), string(clientPEM), string(strangerPEM))
		})
	}
}
