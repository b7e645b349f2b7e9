package tool_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/tool"
)

func TestAllowedEnvKeepsOnlyNamedVariables(t *testing.T) {
	environ := []string{"PATH=/bin", "OPENAI_API_KEY=sk-secret", "LC_ALL=C", "LC=x", "MY_APP_TOKEN=t", "MY_APPX=y", "=odd", "NOEQUALS", "HOME=/h"}
	got := tool.AllowedEnv(environ, []string{"PATH", "LC_*"}, []string{"MY_APP_*", "HOME", "*"})
	require.Equal(t, []string{"PATH=/bin", "LC_ALL=C", "MY_APP_TOKEN=t", "HOME=/h"}, got, "a bare * allows nothing")
	require.Empty(t, tool.AllowedEnv(environ))
}
