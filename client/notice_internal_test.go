package client

import (
	"encoding/json"
	"testing"

	"weft.dev/weft/api"
	"weft.dev/weft/event"
	jrpc "weft.dev/weft/internal/jsonrpc/client"
)

// The dispatcher decodes each notification once into what its
// subscription yields, and routes one whose params do not decode to its
// subscription as an error when they still name it.
func TestDecodeNotice(t *testing.T) {
	for _, tc := range []struct {
		method, params string
		id             string // "" when the notice is dropped
		check          func(notice) bool
	}{
		{api.NotifyEvent, `{"subscriptionId":"sub_1","event":{"seq":7,"type":"run.queued"}}`, "sub_1",
			func(n notice) bool { e, ok := n.value.(event.Event); return ok && e.Seq == 7 && n.err == nil }},
		{api.NotifyClosed, `{"subscriptionId":"sub_1","reason":"overflow","cursor":7}`, "sub_1",
			func(n notice) bool {
				c, ok := n.value.(api.ClosedNotification)
				return ok && c.Reason == api.ReasonOverflow && n.err == nil
			}},
		{api.NotifyProcessOutput, `{"subscriptionId":"sub_2","chunk":{"offset":3}}`, "sub_2",
			func(n notice) bool { _, ok := n.value.(api.Chunk); return ok && n.err == nil }},
		{api.NotifyProcessClosed, `{"subscriptionId":"sub_2","reason":"ended"}`, "sub_2",
			func(n notice) bool { _, ok := n.value.(api.ProcessClosedNotification); return ok && n.err == nil }},
		// The event does not decode, but the subscription is named.
		{api.NotifyEvent, `{"subscriptionId":"sub_1","event":{"seq":"seven"}}`, "sub_1",
			func(n notice) bool { return n.value == nil && n.err != nil }},
		// Nothing names a subscription.
		{api.NotifyEvent, `{"event":{"seq":1}}`, "", nil},
		{api.NotifyEvent, `[1,2]`, "", nil},
		{"other/method", `{"subscriptionId":"sub_1"}`, "", nil},
	} {
		id, n, ok := decodeNotice(jrpc.Notification{Method: tc.method, Params: json.RawMessage(tc.params)})
		if ok != (tc.id != "") || id != tc.id {
			t.Errorf("%s %s: routed to %q (%v), want %q", tc.method, tc.params, id, ok, tc.id)
			continue
		}
		if ok && (n.method != tc.method || !tc.check(n)) {
			t.Errorf("%s %s: notice %+v", tc.method, tc.params, n)
		}
	}
}
