package devserver

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// The UI answers as soon as StartUI returns: a browser sent to its URL
// right away is not refused.
func TestStartUIReturnsOnceItListens(t *testing.T) {
	for range 20 {
		port, err := FreePort()
		require.NoError(t, err)
		ui, err := StartUI(UIOptions{Port: port, TemporalAddress: "127.0.0.1:1"})
		require.NoError(t, err)
		resp, err := http.Get(ui.URL() + "/healthz")
		ui.Stop()
		require.NoError(t, err, "the UI did not listen when StartUI returned")
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
	}
}
