package config

import (
	"os"
	"slices"
	"sync"
)

// Secrets named by *_env keys are moved out of the process environment at
// `agentgw serve` start (TakeSecretEnv): what stays in the environment is
// inherited by whatever the process starts and shown in
// /proc/<pid>/environ. ReadSecret keeps finding them here, so reconnects
// that re-read a header or key still work.
var (
	takenMu sync.RWMutex
	taken   = map[string]string{}
)

// SecretEnvNames lists the environment variables the config reads secrets
// from: xmpp.secret_env, store.dsn_env and those of the bridge sections
// (SecretSources: connector api_key_env, MCP headers_env values).
func (c *Config) SecretEnvNames() []string {
	var names []string
	add := func(n string) {
		if n != "" && !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	add(c.XMPP.SecretEnv)
	add(c.Store.DSNEnv)
	add(c.Console.TokenEnv)
	for _, a := range c.Agents {
		if s, ok := a.Section.(SecretSources); ok {
			envs, _ := s.SecretSources()
			for _, n := range envs {
				add(n)
			}
		}
	}
	slices.Sort(names)
	return names
}

// TakeSecretEnv reads each named variable into memory and unsets it, and
// returns the names it found set. Later ReadSecret calls return the value.
func TakeSecretEnv(names ...string) []string {
	takenMu.Lock()
	defer takenMu.Unlock()
	var got []string
	for _, n := range names {
		if v, ok := os.LookupEnv(n); ok {
			taken[n] = v
			got = append(got, n)
			os.Unsetenv(n)
		}
	}
	return got
}

func lookupSecretEnv(name string) (string, bool) {
	takenMu.RLock()
	v, ok := taken[name]
	takenMu.RUnlock()
	if ok {
		return v, true
	}
	return os.LookupEnv(name)
}
