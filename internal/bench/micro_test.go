package bench

import "testing"

func BenchmarkEncodeOutcome(b *testing.B)    { BenchEncodeOutcome(b) }
func BenchmarkDecodeOutcome(b *testing.B)    { BenchDecodeOutcome(b) }
func BenchmarkEncodeCard(b *testing.B)       { BenchEncodeCard(b) }
func BenchmarkDecodeCard(b *testing.B)       { BenchDecodeCard(b) }
func BenchmarkRenderCard(b *testing.B)       { BenchRenderCard(b) }
func BenchmarkTranscriptAppend(b *testing.B) { BenchTranscriptAppend(b) }
func BenchmarkTranscriptLoad50(b *testing.B) { BenchTranscriptLoad50(b) }
