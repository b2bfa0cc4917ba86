package directory_test

import (
	"fmt"

	"github.com/agentgw/agentgw/directory"
)

// ParseManifest validates a manifest and hashes its canonical form: the
// spec's tool-less weather manifest, with its members in any order, has the
// spec's hash.
func ExampleParseManifest() {
	m, err := directory.ParseManifest([]byte(`{
  "manifestSpecVersion": "0",
  "tools": [],
  "agent": {"version": "1.4.0", "name": "weather", "jid": "weather@agents.example"}
}`))
	if err != nil {
		panic(err)
	}
	fmt.Println(m.Endpoint, m.Version)
	fmt.Println(string(m.Canonical))
	fmt.Println(m.Hash)
	// Output:
	// weather@agents.example 1.4.0
	// {"agent":{"jid":"weather@agents.example","name":"weather","version":"1.4.0"},"manifestSpecVersion":"0","tools":[]}
	// K2/YdwvIBAlfUIeZHiNCyiYA4m4W2wrEOqXQDoQyXp4=
}
