package ijson_test

import (
	"fmt"

	"github.com/agentgw/agentgw/internal/ijson"
)

// Canonicalize checks the I-JSON rules and returns the RFC 8785 form that
// manifests and schemas are hashed in: members sorted, numbers in their
// shortest form, no insignificant whitespace.
func ExampleCanonicalize() {
	canon, _, err := ijson.Canonicalize([]byte(`{ "b": 1.0, "a": [ "é", 1e2 ] }`), ijson.Limits{})
	if err != nil {
		panic(err)
	}
	fmt.Println(string(canon))
	fmt.Println(ijson.Hash(canon))

	_, _, err = ijson.Canonicalize([]byte(`{"a":1,"a":2}`), ijson.Limits{})
	fmt.Println(err != nil)
	// Output:
	// {"a":["é",100],"b":1}
	// jftai17Mp2vRjqaHx5YIahtLg41aS2KU5Nskv7cEr/0=
	// true
}
