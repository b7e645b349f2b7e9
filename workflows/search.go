package workflows

import (
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
)

// Search attributes let outside systems find turns without asking each
// one: `TollgateStatus="waiting"` lists every turn a person must answer.
// The names are the contract; the server must have them registered
// (worker --dev and the compose setup do).
var (
	StatusAttr       = temporal.NewSearchAttributeKeyKeyword("TollgateStatus")
	WaitingCallsAttr = temporal.NewSearchAttributeKeyKeywordList("TollgateWaitingCalls")
	WaitingToolsAttr = temporal.NewSearchAttributeKeyKeywordList("TollgateWaitingTools")
	UserAttr         = temporal.NewSearchAttributeKeyKeyword("TollgateUser")
	SessionAttr      = temporal.NewSearchAttributeKeyKeyword("TollgateSession")
)

// SearchAttributes are the names and types a server must have registered
// before turns can keep them current.
func SearchAttributes() map[string]enumspb.IndexedValueType {
	return map[string]enumspb.IndexedValueType{
		StatusAttr.GetName():       enumspb.INDEXED_VALUE_TYPE_KEYWORD,
		WaitingCallsAttr.GetName(): enumspb.INDEXED_VALUE_TYPE_KEYWORD_LIST,
		WaitingToolsAttr.GetName(): enumspb.INDEXED_VALUE_TYPE_KEYWORD_LIST,
		UserAttr.GetName():         enumspb.INDEXED_VALUE_TYPE_KEYWORD,
		SessionAttr.GetName():      enumspb.INDEXED_VALUE_TYPE_KEYWORD,
	}
}
