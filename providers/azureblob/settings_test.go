package azureblob_test

import (
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/electd/electd/internal/redact"
	"github.com/electd/electd/providers/azureblob"
)

const (
	sig   = "c4n4rySig+/abc="
	token = "sv=2022-11-02&ss=b&srt=co&sp=rwdlac&se=2099-01-01T00:00:00Z&sig=" + "c4n4rySig%2B%2Fabc%3D"
	key   = "c4n4ryKey+/abcdefgh=="
)

func TestSecrets(t *testing.T) {
	for _, c := range []struct {
		name     string
		settings azureblob.Settings
		want     []string
	}{
		{"sas_token", azureblob.Settings{AccountURL: "https://acct.blob.core.windows.net/", SASToken: "?" + token},
			[]string{"?" + token, token, sig}},
		{"account_url with a query", azureblob.Settings{AccountURL: "https://acct.blob.core.windows.net/?" + token},
			[]string{token, sig}},
		{"connection string with a key", azureblob.Settings{ConnectionString: "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=" + key + ";EndpointSuffix=core.windows.net"},
			[]string{key}},
		{"connection string with a SAS", azureblob.Settings{ConnectionString: "BlobEndpoint=https://acct.blob.core.windows.net/;SharedAccessSignature=" + token},
			[]string{token, sig}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := c.settings.Secrets()
			for _, w := range append(c.want, c.settings.ConnectionString) {
				if w != "" && !slices.Contains(got, w) {
					t.Errorf("Secrets() = %q, want it to hold %q", got, w)
				}
			}
		})
	}
}

// The SDK's errors quote the request URL, whose query it rebuilds from the
// token with its own parameters, sorted and escaped: the error seen in
// electd's log before the token's parts were secrets.
func TestSecretsMaskTheSDKsRequestURL(t *testing.T) {
	s := azureblob.Settings{AccountURL: "http://127.0.0.1:1/devstoreaccount1", SASToken: token}
	q, _ := url.ParseQuery(token)
	q.Set("comp", "lease")
	msg := `azureblob: acquire "j1": take lease: Put "http://127.0.0.1:1/devstoreaccount1/electd-leases/j1?` + q.Encode() + `": dial tcp 127.0.0.1:1: connect: connection refused`
	got := redact.New(s.Secrets()...).String(msg)
	for _, part := range []string{sig, url.QueryEscape(sig), "c4n4ry"} {
		if strings.Contains(got, part) {
			t.Errorf("masked message still holds %q: %s", part, got)
		}
	}
}
