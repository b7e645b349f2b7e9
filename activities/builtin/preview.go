package builtin

import (
	"errors"
	"fmt"

	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/tool"
)

// maxPreviewFileBytes bounds what a preview diffs: a current file over it
// is not read, and new content over it is not diffed; the preview says so
// instead. A card carries at most results.MaxPreviewBytes of diff anyway,
// and diffing megabytes to show 64 KiB of them would only keep the person
// waiting for the card.
const maxPreviewFileBytes = 1 << 20

// tooLarge is a file a preview does not diff.
type tooLarge struct {
	rel         string
	size, limit int64
}

func (e *tooLarge) Error() string {
	return fmt.Sprintf("%s is %d bytes, more than the %d bytes a preview diffs", e.rel, e.size, e.limit)
}

// diff is what the preview shows in place of the diff, on one line as
// diff(1) reports binary files.
func (e *tooLarge) diff() results.FileDiff {
	return results.FileDiff{Path: e.rel, Diff: e.Error() + "; the change is not shown\n"}
}

// previewChange turns a planned change into what write_file's and
// edit_file's Preview return: the diff Run would report, nothing when
// the call would change nothing, and the tool's own sentence when Run
// would refuse the call.
func previewChange(ch fileChange, err error) ([]results.FileDiff, error) {
	var big *tooLarge
	var te *toolError
	switch {
	case errors.As(err, &big):
		return []results.FileDiff{big.diff()}, nil
	case errors.As(err, &te):
		return nil, tool.WouldFail("%s", te.msg)
	case err != nil:
		return nil, err
	}
	defer ch.close()
	if ch.unchanged() {
		return nil, nil
	}
	if n := int64(len(ch.updated)); n > maxPreviewFileBytes {
		big := &tooLarge{rel: ch.t.rel, size: n, limit: maxPreviewFileBytes}
		return []results.FileDiff{big.diff()}, nil
	}
	return []results.FileDiff{ch.diff()}, nil
}
