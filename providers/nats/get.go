package nats

import (
	"bytes"
	"context"
	"encoding/json"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// entry is a key's last write, as the bucket's stream leader has it.
type entry struct {
	value   []byte
	rev     uint64
	created time.Time // stamped by the stream's leader when it stored the write
}

// get reads key's last write from the leader of the bucket's stream (the
// JetStream API's STREAM.MSG.GET), not with the client's key-value Get. A
// bucket allows direct gets, which any replica answers, sent to one of the
// replicas' queue subscribers: a follower may answer with a write older than
// one already acknowledged (in the cluster suite, an agent read token 7
// after it had seen 8, and a clock reading that old makes a term look
// longer), and after a host was isolated, candidates connected to a healthy
// server had their reads of the clock hang for the probe's whole 5 s while
// the lease ran out (nats-server 2.15.2; the stream's leader was elsewhere).
// The leader's answer comes from the member that orders the writes.
func (p *Provider) get(ctx context.Context, key string) (entry, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, opTimeout)
		defer cancel()
	}
	req, err := json.Marshal(struct {
		LastBySubject string `json:"last_by_subj"`
	}{"$KV." + p.bucket + "." + key})
	if err != nil {
		return entry{}, err
	}
	msg, err := p.nc.RequestWithContext(ctx, "$JS.API.STREAM.MSG.GET.KV_"+p.bucket, req)
	if err != nil {
		return entry{}, err
	}
	var resp struct {
		Message *struct {
			Seq    uint64    `json:"seq"`
			Header []byte    `json:"hdrs"`
			Data   []byte    `json:"data"`
			Time   time.Time `json:"time"`
		} `json:"message"`
		Error *jetstream.APIError `json:"error"`
	}
	if err := json.Unmarshal(msg.Data, &resp); err != nil {
		return entry{}, err
	}
	switch {
	case resp.Error != nil && resp.Error.ErrorCode == jetstream.JSErrCodeMessageNotFound:
		return entry{}, jetstream.ErrKeyNotFound
	case resp.Error != nil && resp.Error.ErrorCode == jetstream.JSErrCodeStreamNotFound:
		return entry{}, jetstream.ErrBucketNotFound
	case resp.Error != nil:
		return entry{}, resp.Error
	case resp.Message == nil:
		return entry{}, jetstream.ErrKeyNotFound
	}
	m := resp.Message
	// A delete or purge marker (KV-Operation, or a marker's reason) is no
	// value, as for the client's Get.
	if bytes.Contains(m.Header, []byte("KV-Operation:")) || bytes.Contains(m.Header, []byte("Nats-Marker-Reason:")) {
		return entry{rev: m.Seq, created: m.Time}, jetstream.ErrKeyDeleted
	}
	return entry{value: m.Data, rev: m.Seq, created: m.Time}, nil
}
