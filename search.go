package tollgate

import (
	"context"
	"fmt"
	"slices"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/tollgate-dev/tollgate/workflows"
)

// MissingSearchAttributes lists, sorted, the Tollgate search attributes
// the namespace lacks (workflows.SearchAttributes). A worker runs turns
// without search attributes until none is missing; until then turns
// cannot be listed by status.
func MissingSearchAttributes(ctx context.Context, c client.Client, namespace string) ([]string, error) {
	resp, err := c.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: namespace})
	if err != nil {
		return nil, fmt.Errorf("list the search attributes of namespace %s: %w", namespace, err)
	}
	var missing []string
	for name, typ := range workflows.SearchAttributes() {
		if got, ok := resp.GetCustomAttributes()[name]; !ok || got != typ {
			missing = append(missing, name)
		}
	}
	slices.Sort(missing)
	return missing, nil
}

// RegisterSearchAttributes adds the Tollgate search attributes the
// namespace lacks. It needs the operator permissions a development
// server gives everyone; production servers register them once, with the
// `temporal operator search-attribute create` commands docs/turns.md gives.
func RegisterSearchAttributes(ctx context.Context, c client.Client, namespace string) error {
	missing, err := MissingSearchAttributes(ctx, c, namespace)
	if err != nil || len(missing) == 0 {
		return err
	}
	all := workflows.SearchAttributes()
	add := map[string]enumspb.IndexedValueType{}
	for _, name := range missing {
		add[name] = all[name]
	}
	if _, err := c.OperatorService().AddSearchAttributes(ctx, &operatorservice.AddSearchAttributesRequest{Namespace: namespace, SearchAttributes: add}); err != nil {
		return fmt.Errorf("register search attributes %v in namespace %s: %w", missing, namespace, err)
	}
	return nil
}
