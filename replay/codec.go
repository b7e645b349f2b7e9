package replay

import (
	"fmt"
	"os"

	commonpb "go.temporal.io/api/common/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/worker"

	"github.com/tollgate-dev/tollgate/storage/codec"
)

// withCodec gives the replayer the payload codec the worker encrypted
// with: opts.Codec, else the keys file TOLLGATE_CODEC_KEYS_FILE names. An
// encrypted history the keys cannot open fails here, naming the key and
// what to do, rather than as a decoding error deep in a workflow task.
func withCodec(ro *worker.WorkflowReplayerOptions, h *historypb.History, opts Options) error {
	pc := opts.Codec
	if pc == nil {
		keys, err := codec.FromEnv(os.Getenv)
		if err != nil {
			return err
		}
		if keys != nil {
			pc = keys
		}
	}
	if pc != nil {
		ro.DataConverter = converter.NewCodecDataConverter(converter.GetDefaultDataConverter(), pc)
	}
	started := h.GetEvents()[0].GetWorkflowExecutionStartedEventAttributes()
	for _, p := range started.GetInput().GetPayloads() {
		if string(p.GetMetadata()[codec.MetadataEncoding]) != codec.EncodingEncrypted {
			continue
		}
		if pc == nil {
			return fmt.Errorf("the history's payloads are encrypted (key %q); replay needs the keys: set %s to a keys file that holds that key", p.GetMetadata()[codec.MetadataKeyID], codec.EnvKeysFile)
		}
		if _, err := pc.Decode([]*commonpb.Payload{p}); err != nil {
			return fmt.Errorf("cannot read the history's payloads: %w", err)
		}
	}
	return nil
}
