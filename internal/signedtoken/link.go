package signedtoken

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/tollgate-dev/tollgate/results"
)

// LinkClaims are what one one-click decision link decides: a URL, sent
// by email or chat, that approves or denies one waiting call. The gateway
// still checks that the call waits, that its arguments hash to ArgsHash
// and that the turn is still the execution chain Run names, and derives
// the Update id from ID so a link applies at most once. Every field is
// signed.
type LinkClaims struct {
	Turn string `json:"t"`
	// Run is a run id of the turn's execution when the link was made (the
	// run that emitted the event). A turn id can name another execution
	// later (closed turns' ids can be taken again, by the Go API or a
	// rerun key, or once retention forgets them); the gateway applies a
	// link only while the turn's current run belongs to the same chain of
	// runs as Run, so a continue-as-new keeps it working and a new turn
	// under the old id does not. Tokens from before it have none and are
	// refused (ErrUnbound).
	Run      string               `json:"r,omitempty"`
	Call     string               `json:"c"`
	Decision results.DecisionKind `json:"d"` // approve or deny only
	// ArgsHash binds the link to the call's arguments when it was made:
	// ArgsHash(card.EffectiveArguments()).
	ArgsHash string `json:"h"`
	// By is the principal the decision is recorded as (e.g. "webhook",
	// "email:ops@example.com").
	By      string    `json:"b"`
	Expires time.Time `json:"e"`
	// ID is random (16 bytes, base64url) unless the signer chose it; the
	// gateway derives the Update id from it so a link applies at most
	// once.
	ID string `json:"i"`
}

// UpdateID is the Temporal Update id a link's decision is sent with: a
// second use of the same link is the same Update, which applies once.
func (c LinkClaims) UpdateID() string { return "link-" + c.ID }

var errNoRun = errors.New("a link needs a run: the run id of the turn's execution it decides for")

// check says in a sentence what makes c unfit to sign.
func (c LinkClaims) check() error {
	p := linkPurpose
	err := checkClaims(c.ID, c.Expires,
		field{"turn", c.Turn}, field{"call", c.Call}, field{"arguments hash", c.ArgsHash}, field{"principal (by)", c.By})
	if err != nil {
		return fmt.Errorf("%s %w", p.a(), err)
	}
	if c.Decision != results.DecisionApprove && c.Decision != results.DecisionDeny {
		return fmt.Errorf("%s can only approve or deny, not %q", p.a(), c.Decision)
	}
	// Last, so VerifyLink can tell an old token (all else fine) from a bad
	// one.
	if c.Run == "" {
		return errNoRun
	}
	if err := checkClaims(c.ID, c.Expires, field{"run", c.Run}); err != nil {
		return fmt.Errorf("%s %w", p.a(), err)
	}
	return nil
}

// SignLink returns the token of a decision link for c. An empty ID is
// filled with NewID; claims no link should carry are refused with a
// sentence.
func (s *Signer) SignLink(c LinkClaims) (string, error) {
	c.ID, c.Expires = stamp(c.ID, c.Expires)
	if err := c.check(); err != nil {
		return "", err
	}
	return s.seal(linkPurpose, c)
}

// VerifyLink checks token as a decision link: its signature first
// (nothing of a forged token is read), then its claims and its expiry
// against now. Failures wrap ErrTampered, ErrUnbound or ErrExpired;
// claims are returned only when every check passes.
func (s *Signer) VerifyLink(token string, now time.Time) (LinkClaims, error) {
	var c LinkClaims
	if err := s.open(linkPurpose, token, &c); err != nil {
		return LinkClaims{}, tampered(linkPurpose, err)
	}
	invalid := c.check()
	if errors.Is(invalid, errNoRun) {
		return LinkClaims{}, ErrUnbound
	}
	if err := verified(linkPurpose, invalid, c.Expires, now); err != nil {
		return LinkClaims{}, err
	}
	return c, nil
}

// ArgsHash is the base64url SHA-256 of args in compact JSON
// (results.CompactJSON), so the same arguments hash alike however they
// were spaced; key order still matters, as it does to the tool.
func ArgsHash(args json.RawMessage) string {
	sum := sha256.Sum256(results.CompactJSON(args))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}
