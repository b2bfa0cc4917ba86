package main

import (
	"flag"
	"fmt"
	"net"
	"os"
	"path/filepath"

	"github.com/agentgw/agentgw/internal/config"
)

// bearerFlags are the token flags of the HTTP fronts (`mcp --http`, `a2a`).
type bearerFlags struct {
	env, file *string
}

func addBearerFlags(fs *flag.FlagSet) bearerFlags {
	return bearerFlags{
		env:  fs.String("bearer-env", "", "environment variable holding the bearer token every HTTP request must carry"),
		file: fs.String("bearer-file", "", "file holding the bearer token; created with a fresh random token (mode 0600) if missing. Without this or --bearer-env, a fresh token is written to a private temporary file whose path is printed"),
	}
}

func (b bearerFlags) given() bool { return *b.env != "" || *b.file != "" }

// listen checks addr and the token flags, reads (or creates) the token and
// opens the listener. path is where the token is when the operator must be
// told (never the token itself); cleanup removes a temporary token file and
// closes the listener.
func (b bearerFlags) listen(addr string) (ln net.Listener, token, path string, cleanup func(), err error) {
	cleanup = func() {}
	if *b.env != "" && *b.file != "" {
		return nil, "", "", cleanup, usagef("give --bearer-env or --bearer-file, not both")
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, "", "", cleanup, usagef("--http %q is not host:port", addr)
	}
	if ip := net.ParseIP(host); (ip == nil || !ip.IsLoopback()) && host != "localhost" && !b.given() {
		return nil, "", "", cleanup, usagef("--http on a non-loopback address needs --bearer-env or --bearer-file")
	}
	var dirs []string
	cleanup = func() {
		if ln != nil {
			ln.Close()
		}
		for _, d := range dirs {
			os.RemoveAll(d)
		}
	}
	switch {
	case *b.env != "":
		if token, err = config.ReadSecret(*b.env, ""); err != nil {
			return nil, "", "", cleanup, fmt.Errorf("--bearer-env: %w", err)
		}
	case *b.file != "":
		if token, err = bearerFromFile(*b.file); err != nil {
			return nil, "", "", cleanup, fmt.Errorf("--bearer-file: %w", err)
		}
		path = *b.file
	default:
		dir, err := os.MkdirTemp("", "agentgw-http-")
		if err != nil {
			return nil, "", "", cleanup, fmt.Errorf("--http: cannot create the token directory: %w", err)
		}
		dirs = append(dirs, dir)
		path = filepath.Join(dir, "bearer-token")
		if token, err = bearerFromFile(path); err != nil {
			return nil, "", "", cleanup, fmt.Errorf("--http: %w", err)
		}
	}
	if ln, err = net.Listen("tcp", addr); err != nil {
		return nil, "", "", cleanup, fmt.Errorf("--http: %w", err)
	}
	return ln, token, path, cleanup, nil
}
