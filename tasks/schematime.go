package tasks

import (
	"errors"

	"github.com/agentgw/agentgw/internal/schema"
)

// validationTimedOut reports a schema validation stopped by the
// validation-time limit (a regular expression match past
// schema.MatchTimeout). The spec answers such a limit with
// resource-constraint, not with not-acceptable: the value was not judged.
func validationTimedOut(err error) bool { return errors.Is(err, schema.ErrTimeout) }
