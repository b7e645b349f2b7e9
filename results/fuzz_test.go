package results_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/results"
)

// FuzzDecodeOutcome checks that the decoder only accepts what the encoder
// can write back: whatever decodes is valid, re-encodes, and decodes to the
// same value and the same bytes.
func FuzzDecodeOutcome(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		var o results.Outcome
		if err := o.UnmarshalJSON(data); err != nil {
			return
		}
		require.NotEmpty(t, o.Kind)
		require.NoError(t, o.Validate())

		b, err := json.Marshal(o)
		require.NoError(t, err)
		var again results.Outcome
		require.NoError(t, json.Unmarshal(b, &again))
		require.Equal(t, o, again)
		b2, err := json.Marshal(again)
		require.NoError(t, err)
		require.Equal(t, string(b), string(b2))

		// Helpers must cope with anything that decodes.
		_ = o.TruncateOutput(results.Limits{MaxBytes: 64, MaxLines: 3})
	})
}

// FuzzDecodeCard is the same property for cards, plus: every decoded card
// can be summarised, and a final one always renders.
func FuzzDecodeCard(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		var c results.Card
		if err := c.UnmarshalJSON(data); err != nil {
			return
		}
		require.NotEmpty(t, c.State)
		require.NoError(t, c.Validate())

		b, err := json.Marshal(c)
		require.NoError(t, err)
		var again results.Card
		require.NoError(t, json.Unmarshal(b, &again))
		require.Equal(t, c, again)
		b2, err := json.Marshal(again)
		require.NoError(t, err)
		require.Equal(t, string(b), string(b2))

		_ = c.Summary()
		m, err := results.Render(c)
		if c.State.Final() {
			require.NoError(t, err)
			require.NotEmpty(t, m.Parts)
		} else {
			require.Error(t, err)
		}
	})
}
