package results

// What the external tests check that callers have no use for.
var (
	States            = states
	Kinds             = kinds
	ErrUnknownVersion = errUnknownVersion
)

func (m Message) Media() []Part { return m.media() }
