// Package workflows holds the AgentTurn workflow and its wire contract:
// the names other systems use to start and talk to a turn (contract.go),
// the input, respond payload and result types, the approval policy
// (policy.go) and the validation of responses (respond.go).
//
// testdata/histories/ holds the replay corpus: histories recorded from
// real runs that every change to this package must still replay.
package workflows
