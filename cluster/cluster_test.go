package cluster_test

import (
	"testing"

	"github.com/agentgw/agentgw/cluster"
	"github.com/agentgw/agentgw/cluster/clustertest"
)

func TestLocalConformance(t *testing.T) {
	clustertest.Exercise(t, func(t *testing.T, n int) ([]clustertest.Member, bool) {
		l := cluster.NewLocal()
		ms := make([]clustertest.Member, n)
		for i := range ms {
			ms[i] = l
		}
		return ms, false
	})
}
