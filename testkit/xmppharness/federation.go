package xmppharness

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"syscall"
)

// Federation domains.
const (
	FedDomainA    = "a.test"
	FedDomainB    = "b.test"
	FedComponentB = "agents.b.test"
)

// LaunchFederation starts two federated Prosody servers: a (a.test) and b
// (b.test plus component agents.b.test). S2S needs port 5269, so each gets a
// loopback address of its own: 127.0.0.2 and 127.0.0.3 when free, else other
// 127/8 addresses, reserved with lock files so parallel suites never collide.
// Empty dirs default to new temp dirs.
func LaunchFederation(ctx context.Context, dirA, dirB string) (a, b *Server, err error) {
	ipA, releaseA, err := reserveS2SAddr("127.0.0.2")
	if err != nil {
		return nil, nil, err
	}
	ipB, releaseB, err := reserveS2SAddr("127.0.0.3")
	if err != nil {
		releaseA()
		return nil, nil, err
	}
	hosts := map[string]string{FedDomainA: ipA, FedDomainB: ipB, FedComponentB: ipB}
	a, err = LaunchProsody(ctx, ProsodyOptions{Domain: FedDomainA, Interface: ipA, Dir: dirA, S2S: true, Hosts: hosts})
	if err != nil {
		releaseA()
		releaseB()
		return nil, nil, err
	}
	a.release = releaseA
	b, err = LaunchProsody(ctx, ProsodyOptions{Domain: FedDomainB, ComponentDomain: FedComponentB,
		Interface: ipB, Dir: dirB, S2S: true, Hosts: hosts})
	if err != nil {
		a.Close()
		releaseB()
		return nil, nil, err
	}
	b.release = releaseB
	return a, b, nil
}

// reserveS2SAddr picks a loopback address whose port 5269 is free, trying
// preferred first, and holds an flock on it until release is called (or the
// process dies).
func reserveS2SAddr(preferred string) (ip string, release func(), err error) {
	candidates := []string{preferred}
	for i := 0; i < 40; i++ {
		var b [3]byte
		_, _ = rand.Read(b[:])
		if b[2] == 0 || b[2] == 255 {
			b[2] = 7
		}
		candidates = append(candidates, fmt.Sprintf("127.%d.%d.%d", b[0]|1, b[1], b[2]))
	}
	for _, ip := range candidates {
		lockPath := filepath.Join(os.TempDir(), "agentgw-s2s-"+ip+".lock")
		f, err := os.OpenFile(lockPath, os.O_CREATE|os.O_RDWR, 0o644)
		if err != nil {
			continue
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			f.Close()
			continue
		}
		l, err := net.Listen("tcp", net.JoinHostPort(ip, "5269"))
		if err != nil {
			f.Close()
			continue
		}
		l.Close()
		return ip, func() { f.Close() }, nil
	}
	return "", nil, errors.New("xmppharness: no loopback address with a free port 5269")
}
