// Package e2e proves Tollgate's guarantees on a real Temporal server: the
// server's own temporaltest server in-process, and the embedded SQLite dev
// server for restarts. Everything lives in _test.go files; there is no
// importable code here.
//
//	go test ./internal/tests/e2e/                        integration and crash tests
//	go test -count=20 -run Crash ./internal/tests/e2e/   the crash tests, repeatedly
//	go test ./internal/tests/e2e/ -record                re-record the replay corpus
//
// With -record every test that drives a turn writes that turn's history to
// workflows/testdata/histories/<path>.json, in the format
// `temporal workflow show --output json` writes, so the corpus is always
// recorded from the same runs that the integration tests check.
package e2e
