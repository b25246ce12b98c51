package azureblob

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
)

// Azure's lease durations: whole seconds from 15 to 60 (or infinite, which a
// leader election cannot use: a crashed holder would keep it forever).
const (
	MinTTL = 15 * time.Second
	MaxTTL = 60 * time.Second
)

// Metadata names. Azure hands them back capitalised ("Holder"), so they are
// read without regard to case.
const (
	metaHolder  = "holder"
	metaToken   = "token"
	metaValue   = "value"
	metaTTL     = "lease_ttl"
	metaExpires = "expires"
)

// leaseNamespace is the UUID namespace of lease ids (a fixed random UUID).
var leaseNamespace = uuid.MustParse("6f1d0c3e-8a52-4f0b-9d6e-2b7f5a1c9e40")

// record is what the blob's metadata says about the lease. It is the truth
// about tokens and values; who holds the lease right now is the blob lease's
// to say.
type record struct {
	holder string
	token  uint64
	value  string
	// ttl and expires are those of the last acquire or renew; expires is the
	// writer's estimate (Azure does not expose a lease's expiry time).
	ttl     time.Duration
	expires time.Time
}

// metadata encodes r. Metadata travels as HTTP headers: ASCII only, and
// surrounding spaces would be trimmed, so holder and value are
// percent-encoded.
func (r record) metadata() map[string]*string {
	s := func(v string) *string { return &v }
	md := map[string]*string{
		metaHolder: s(url.PathEscape(r.holder)),
		metaToken:  s(strconv.FormatUint(r.token, 10)),
		metaValue:  s(url.PathEscape(r.value)),
		metaTTL:    s(r.ttl.String()),
	}
	if !r.expires.IsZero() {
		md[metaExpires] = s(r.expires.UTC().Format(time.RFC3339Nano))
	}
	return md
}

// parseRecord decodes the metadata of a lease blob. A blob with no metadata
// (created, never acquired) is the zero record. Anything unreadable is an
// error rather than a guess: a token read as 0 would go backwards.
func parseRecord(md map[string]*string) (record, error) {
	get := func(name string) string {
		for k, v := range md {
			if strings.EqualFold(k, name) && v != nil {
				return *v
			}
		}
		return ""
	}
	var r record
	var err error
	if r.holder, err = url.PathUnescape(get(metaHolder)); err != nil {
		return record{}, fmt.Errorf("metadata %s: %w", metaHolder, err)
	}
	if r.value, err = url.PathUnescape(get(metaValue)); err != nil {
		return record{}, fmt.Errorf("metadata %s: %w", metaValue, err)
	}
	if t := get(metaToken); t != "" {
		if r.token, err = strconv.ParseUint(t, 10, 64); err != nil {
			return record{}, fmt.Errorf("metadata %s: %w", metaToken, err)
		}
	}
	if t := get(metaTTL); t != "" {
		if r.ttl, err = time.ParseDuration(t); err != nil {
			return record{}, fmt.Errorf("metadata %s: %w", metaTTL, err)
		}
	}
	if t := get(metaExpires); t != "" {
		if r.expires, err = time.Parse(time.RFC3339Nano, t); err != nil {
			return record{}, fmt.Errorf("metadata %s: %w", metaExpires, err)
		}
	}
	return r, nil
}

// leaseID is the Azure lease id of holder on key. Being a function of both,
// a holder that restarts proposes the same id and gets its own lease back
// (Azure accepts an Acquire with the id of the active lease). It is not a
// secret: anyone who can write the blob can break its lease anyway.
func leaseID(holder, key string) string {
	return uuid.NewSHA1(leaseNamespace, []byte(holder+"\x00"+key)).String()
}

// blobName maps a key to a blob name, one to one. Path escaping keeps the
// job names of the configuration (letters, digits, "_", ".", "-") as they
// are, turns "/" into "%2F" so keys make no virtual directories, and a
// trailing "." into "%2E" because Azure drops trailing dots from names.
func blobName(key string) string {
	n := url.PathEscape(key)
	if strings.HasSuffix(n, ".") {
		n = n[:len(n)-1] + "%2E"
	}
	return n
}

// CheckTTL reports whether ttl can be an Azure lease duration: whole seconds
// from 15s to 60s. Rounding is not an option: a shorter lease would expire
// before the leader's safety rule expects, a longer one delays takeover.
func CheckTTL(ttl time.Duration) error {
	if limits.CheckTTL(ttl) != nil {
		return fmt.Errorf("ttl %s is not a valid Azure blob lease duration: use whole seconds from 15s to 60s", ttl)
	}
	return nil
}
