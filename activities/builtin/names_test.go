package builtin

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/connections"
)

func TestNamesListsEveryBuiltin(t *testing.T) {
	tools, err := Tools(Options{Connections: connections.NewMemoryStore()})
	require.NoError(t, err)
	var names []string
	for _, tl := range tools {
		names = append(names, tl.Spec().Name)
	}
	require.Equal(t, names, Names())
}
