package tool

import (
	"encoding/json"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCompileSharedCompilesOncePerSchema(t *testing.T) {
	raw := json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`)
	a, err := CompileShared(raw)
	require.NoError(t, err)
	b, err := CompileShared(append(json.RawMessage(nil), raw...))
	require.NoError(t, err)
	require.Same(t, a, b, "the same bytes share one compiled schema")

	other, err := CompileShared(json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}}}`))
	require.NoError(t, err)
	require.NotSame(t, a, other)

	require.NoError(t, a.Validate(json.RawMessage(`{"path":"a.txt"}`)))
	require.Error(t, a.Validate(json.RawMessage(`{}`)), "a shared schema still validates")

	_, err = CompileShared(json.RawMessage(`{"type":`))
	require.Error(t, err)
	_, err = CompileShared(json.RawMessage(`{"type":`))
	require.Error(t, err, "a schema that failed fails again rather than being cached")
}

func TestCompileSharedConcurrentValidate(t *testing.T) {
	s, err := CompileShared(json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer","minimum":1}},"required":["n"]}`))
	require.NoError(t, err)
	var wg sync.WaitGroup
	errs := make([]error, 64)
	for i := range errs {
		wg.Go(func() {
			if i%2 == 0 {
				errs[i] = s.Validate(json.RawMessage(`{"n":3}`))
			} else if s.Validate(json.RawMessage(`{"n":0}`)) == nil {
				errs[i] = errMissing
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
}

var errMissing = jsonErr("n=0 passed a schema with minimum 1")

type jsonErr string

func (e jsonErr) Error() string { return string(e) }
