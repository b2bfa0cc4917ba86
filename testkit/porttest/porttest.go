// Package porttest picks TCP ports for servers that tests start as other
// processes (Prosody, ejabberd, PostgreSQL, `agentgw serve`), which bind
// the port only later.
//
// A port from the kernel's ":0" lies in the ephemeral range, which is also
// where every outgoing connection on the machine takes its source port: in
// the moment between the pick and the server's bind, a client socket can
// take it and the server fails with "address in use". Free picks below
// that range instead, where no connect() takes ports.
package porttest

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
)

// The range Free picks from when the ephemeral range leaves room below it.
const (
	low      = 20000
	minRoom  = 2000
	attempts = 500
)

var (
	mu    sync.Mutex
	given = map[string]bool{} // this process hands out each port once
)

// Free returns a port on ip that is free now and that no outgoing
// connection will take before a server binds it. Where the kernel's
// ephemeral range leaves no room below it, it falls back to ":0".
func Free(ip string) (int, error) {
	start := ephemeralStart()
	if start-low >= minRoom {
		mu.Lock()
		defer mu.Unlock()
		for range attempts {
			port := low + rand.IntN(start-low)
			addr := net.JoinHostPort(ip, strconv.Itoa(port))
			if given[addr] {
				continue
			}
			l, err := net.Listen("tcp", addr)
			if err != nil {
				continue // taken (or reserved): try another
			}
			l.Close()
			given[addr] = true
			return port, nil
		}
	}
	l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		return 0, fmt.Errorf("porttest: pick a free port on %s: %w", ip, err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Addr is Free as "ip:port".
func Addr(ip string) (string, error) {
	p, err := Free(ip)
	if err != nil {
		return "", err
	}
	return net.JoinHostPort(ip, strconv.Itoa(p)), nil
}

// ephemeralStart reads the first port of the kernel's ephemeral range
// (Linux); 0 when it cannot, which makes Free use ":0".
func ephemeralStart() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 0
	}
	n, err := strconv.Atoi(f[0])
	if err != nil {
		return 0
	}
	return n
}
