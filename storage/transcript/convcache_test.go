package transcript

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/storage/blobstore"
)

// A long chain loaded again after a chunk was added reads that chunk
// alone: the rest comes from the decoded conversation of the head loaded
// before. Everything is still what the chain holds, branches included.
func TestConversationCacheReadsOnlyNewChunks(t *testing.T) {
	s, bucket := memStore(t, Options{ConversationBytes: 1 << 20})
	var want []string
	head := ""
	for i := range minCachedChunks + 4 {
		text := fmt.Sprintf("m%d", i)
		h, err := s.Append(head, []results.Message{results.UserText(text)})
		require.NoError(t, err)
		head, want = h, append(want, text)
	}
	got, err := s.Load(head)
	require.NoError(t, err)
	require.Equal(t, want, texts(got))
	// A caller changing what it got does not change the cache.
	got[0] = results.UserText("changed")
	got = append(got, results.UserText("appended"))

	// Every chunk is gone from the store but the two added next.
	emptyBucket(t, bucket)
	h1, err := s.Append(head, []results.Message{results.AssistantText("a")})
	require.NoError(t, err)
	h2, err := s.Append(h1, []results.Message{results.AssistantText("b")})
	require.NoError(t, err)
	got, err = s.Load(h2)
	require.NoError(t, err)
	require.Equal(t, append(append([]string(nil), want...), "a", "b"), texts(got))

	// A branch from h1 (a session's next turn from an earlier head)
	// finds no conversation cached for h1, which the turn moved on from,
	// and reads the chain from the store, where its start is gone; the
	// branch loaded first is not disturbed by it.
	b, err := s.Append(h1, []results.Message{results.AssistantText("c")})
	require.NoError(t, err)
	_, err = s.Load(b)
	require.ErrorIs(t, err, ErrMissing)
	got, err = s.Load(h2)
	require.NoError(t, err)
	require.Equal(t, append(append([]string(nil), want...), "a", "b"), texts(got))
}

// Short chains are kept only while they are among the recentConvs most
// recently used: a worker parking thousands of short turns does not hold
// their conversations, and the oldest is read from the store again.
func TestConversationCacheKeepsOnlyRecentShortChains(t *testing.T) {
	s, bucket := memStore(t, Options{ConversationBytes: 1 << 20})
	heads := make([]string, recentConvs+1)
	for i := range heads {
		h, err := s.Append("", []results.Message{results.UserText(fmt.Sprint(i))})
		require.NoError(t, err)
		_, err = s.Load(h)
		require.NoError(t, err)
		heads[i] = h
	}
	emptyBucket(t, bucket)
	_, err := s.Load(heads[0])
	require.ErrorIs(t, err, ErrMissing)
	for _, h := range heads[1:] {
		got, err := s.Load(h)
		require.NoError(t, err)
		require.Len(t, got, 1)
	}
}

// Short chains are kept within a quarter of the cache's bytes: a short
// conversation of large tool outputs is read from the store again, not
// held by the hundred.
func TestConversationCacheBoundsShortChainsByBytes(t *testing.T) {
	s, bucket := memStore(t, Options{ConversationBytes: 4 << 10})
	small, err := s.Append("", []results.Message{results.UserText("small")})
	require.NoError(t, err)
	large, err := s.Append("", []results.Message{results.UserText(strings.Repeat("x", 2<<10))})
	require.NoError(t, err)
	for _, h := range []string{small, large} {
		_, err := s.Load(h)
		require.NoError(t, err)
	}
	emptyBucket(t, bucket)
	_, err = s.Load(small)
	require.NoError(t, err)
	_, err = s.Load(large)
	require.ErrorIs(t, err, ErrMissing)
}

// A conversation a model call extended is the next call's without a read:
// the store can be emptied behind it. Another store (another worker)
// reads the same conversation from the chunks Extend stored.
func TestExtendKeepsTheConversationItStored(t *testing.T) {
	s, bucket := memStore(t, Options{ConversationBytes: 1 << 20})
	conv := []results.Message{results.UserText("hi"), results.AssistantText("hello")}
	h1, err := s.Extend(t.Context(), "", conv, 2)
	require.NoError(t, err)
	conv = append(slices.Clone(conv), results.UserText("more"), results.AssistantText("sure"))
	h2, err := s.Extend(t.Context(), h1, conv, 2)
	require.NoError(t, err)

	other := New(blobstore.NewBucket(bucket, nil), Options{})
	got, err := other.Load(h2)
	require.NoError(t, err)
	require.Equal(t, []string{"hi", "hello", "more", "sure"}, texts(got))

	emptyBucket(t, bucket)
	got, err = s.LoadWith(t.Context(), h2, []results.Message{results.UserText("next")})
	require.NoError(t, err)
	require.Equal(t, []string{"hi", "hello", "more", "sure", "next"}, texts(got))
	// The turn moved on from h1: it is no longer held.
	_, err = s.Load(h1)
	require.ErrorIs(t, err, ErrMissing)

	// After a head this store never saw, the chain's length is unknown:
	// nothing is kept, and the next load reads the store.
	h3, err := s.Extend(t.Context(), strings.Repeat("ab", 32), []results.Message{results.UserText("x")}, 1)
	require.NoError(t, err)
	emptyBucket(t, bucket)
	_, err = s.Load(h3)
	require.ErrorIs(t, err, ErrMissing)

	_, err = s.Extend(t.Context(), "", conv, len(conv)+1)
	require.ErrorContains(t, err, "5 new messages of a conversation of 4")
}

// Two conversations built on one cached base (two loads racing from the
// same head) each get their own messages: the second copies the base
// instead of appending where the first did.
func TestConversationCacheBranchesCopy(t *testing.T) {
	c := newConvCache(1 << 20)
	var start [][]results.Message
	for i := range minCachedChunks {
		start = append([][]results.Message{{results.UserText(fmt.Sprint(i))}}, start...)
	}
	c.extend("base", nil, start, 100)
	base, ok := c.get("base")
	require.True(t, ok)
	// Room to append in place, as a conversation grown by append has.
	base.msgs = append(make([]results.Message, 0, len(base.msgs)+8), base.msgs...)
	a := c.extend("a", base, [][]results.Message{{results.AssistantText("a")}}, 10)
	b := c.extend("b", base, [][]results.Message{{results.AssistantText("b")}}, 10)
	require.Equal(t, "a", a[len(a)-1].Text())
	require.Equal(t, "b", b[len(b)-1].Text())
	require.Len(t, a, minCachedChunks+1)
	require.Len(t, b, minCachedChunks+1)
}

// A conversation forgotten (the turn compacted it) is no longer held: it
// is read from the store again, and the conversations kept beside it
// stay.
func TestConversationCacheForgets(t *testing.T) {
	s, bucket := memStore(t, Options{ConversationBytes: 1 << 20})
	chain := func(prefix string) string {
		head := ""
		for i := range minCachedChunks {
			h, err := s.Append(head, []results.Message{results.UserText(fmt.Sprintf("%s%d", prefix, i))})
			require.NoError(t, err)
			head = h
		}
		_, err := s.Load(head)
		require.NoError(t, err)
		return head
	}
	a, b := chain("a"), chain("b")
	emptyBucket(t, bucket)
	s.Forget(a)
	_, err := s.Load(a)
	require.ErrorIs(t, err, ErrMissing)
	got, err := s.Load(b)
	require.NoError(t, err)
	require.Len(t, got, minCachedChunks)
	// Forgetting what is not held does nothing.
	s.Forget(a)
	New(nil, Options{}).Forget(a)
}

// LoadWith hands back the cached conversation and the messages after it
// in one slice of the caller's own: changing it changes nothing cached.
func TestLoadWithCopiesTheCachedConversationOnce(t *testing.T) {
	s, _ := memStore(t, Options{ConversationBytes: 1 << 20})
	head := ""
	var want []string
	for i := range minCachedChunks {
		h, err := s.Append(head, []results.Message{results.UserText(fmt.Sprint(i))})
		require.NoError(t, err)
		head, want = h, append(want, fmt.Sprint(i))
	}
	for range 2 { // from the store, then from the cache
		got, err := s.LoadWith(t.Context(), head, []results.Message{results.AssistantText("next")})
		require.NoError(t, err)
		require.Equal(t, append(append([]string(nil), want...), "next"), texts(got))
		got[0] = results.UserText("changed")
	}
	got, err := s.Load(head)
	require.NoError(t, err)
	require.Equal(t, want, texts(got))
}
