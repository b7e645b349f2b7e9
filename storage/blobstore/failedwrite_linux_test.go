package blobstore

import (
	"bytes"
	"context"
	"io/fs"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// fileSizeLimit is where limitFileSize makes writes fail. It is well
// above the size of the test binary's own log of file accesses (tens of
// KiB for this package), which the go command has it write under the same
// process-wide limit: a lower limit failed that log's writes, and with
// them the package, once its paths grew long enough.
const fileSizeLimit = 4 << 20

// limitFileSize makes every write past fileSizeLimit bytes into a regular
// file fail (EFBIG; the Go runtime ignores SIGXFSZ), as a full disk fails
// one, until the test ends. The limit is process-wide: tests using it do
// not run in parallel.
func limitFileSize(t *testing.T) {
	t.Helper()
	var old syscall.Rlimit
	require.NoError(t, syscall.Getrlimit(syscall.RLIMIT_FSIZE, &old))
	lim := old
	lim.Cur = fileSizeLimit
	require.NoError(t, syscall.Setrlimit(syscall.RLIMIT_FSIZE, &lim))
	t.Cleanup(func() { require.NoError(t, syscall.Setrlimit(syscall.RLIMIT_FSIZE, &old)) })
}

// tooLarge is a blob whose write fails part way under limitFileSize.
func tooLarge() []byte {
	return bytes.Repeat([]byte("0123456789abcdef"), (fileSizeLimit+256<<10)/16)
}

// A write that fails part way (a full disk) leaves nothing under the
// blob's name, nor a temporary file beside it: a truncated blob there
// would be read back as the whole one until its hash is checked, and
// the payload store's Durable space would have to repair it.
func TestFailedWriteLeavesNothingUnderTheKey(t *testing.T) {
	dir := t.TempDir()
	s, err := OpenDir(dir, nil)
	require.NoError(t, err)
	defer s.Close()
	ctx := context.Background()
	data := tooLarge()

	for _, sp := range []Space{testSpace, durable} {
		t.Run(sp.Prefix, func(t *testing.T) {
			limitFileSize(t)
			_, err := s.Put(ctx, sp, data)
			require.Error(t, err)
			require.ErrorIs(t, err, syscall.EFBIG)

			_, err = s.Get(ctx, sp, Sum(data))
			require.ErrorIs(t, err, ErrMissing, "a failed write stored nothing")
			err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
				require.NoError(t, err)
				require.True(t, d.IsDir(), "a failed write left %s behind", p)
				return nil
			})
			require.NoError(t, err)
		})
	}

	// Once there is room again, the same Put stores the blob whole.
	sum, err := s.Put(ctx, durable, data)
	require.NoError(t, err)
	got, err := s.Get(ctx, durable, sum)
	require.NoError(t, err)
	require.Equal(t, data, got)
}
