// Package results is Tollgate's typed outcome model: what a tool returns
// (Outcome), where one tool call has got to (Card), and what the model is
// shown for it (Message). It is pure Go plus encoding/json so that workflow
// code, activities, the CLI and other systems can share it without pulling
// in Temporal.
//
// The encoding is part of the wire contract: every value carries a format
// version and a "kind" or "state" discriminator, unknown discriminators are
// errors, and golden files under testdata/ pin the bytes.
package results
