package azureblob

import (
	"context"
	"net/url"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob"
	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/hcl/v2/hcldec"

	"github.com/electd/electd/providers"
)

// Settings are the attributes of a `provider "azure_blob"` block: a
// connection string, or an account URL with a SAS token or the default Azure
// credentials.
type Settings struct {
	ConnectionString string // secret
	AccountURL       string
	SASToken         string // secret
	Container        string // DefaultContainer in a configuration
}

var _ providers.Settings = (*Settings)(nil)

// maxField bounds keys and holders (blob names and metadata values).
const maxField = 255

// Azure blob leases last 15 to 60 whole seconds, and the lease is the term:
// a ttl it cannot express would either expire before the leader's safety
// rule expects or hold off takeover for longer than configured.
var limits = providers.Limits{MaxKey: maxField, MaxHolder: maxField, MinTTL: MinTTL, MaxTTL: MaxTTL, TTLStep: time.Second}

// Type is the azure_blob provider type of the configuration language.
func Type() providers.Type {
	str := func(name string) hcldec.Spec { return providers.StringAttr(name, false) }
	return providers.Type{
		Spec: hcldec.ObjectSpec{
			"connection_string": str("connection_string"),
			"account_url":       str("account_url"),
			"sas_token":         str("sas_token"),
			"container":         str("container"),
		},
		Decode: func(b *providers.Block) providers.Settings {
			s := &Settings{
				ConnectionString: b.String("connection_string", ""),
				AccountURL:       b.String("account_url", ""),
				SASToken:         b.String("sas_token", ""),
				Container:        b.String("container", DefaultContainer),
			}
			return s
		},
	}
}

// Limits are Azure's lease durations and the record's field sizes.
func (s *Settings) Limits() providers.Limits { return limits }

// Secrets are the connection string, the SAS token, and the credentials
// inside them: a connection string's AccountKey and SharedAccessSignature,
// and an account_url's query (a SAS token too). The SDK's errors quote the
// request URL, whose query it rebuilds from the token sorted and
// re-escaped, so the token as written is not enough: see sasSecrets.
func (s *Settings) Secrets() []string {
	out := []string{s.ConnectionString, s.SASToken}
	out = append(out, sasSecrets(s.SASToken)...)
	if u, err := url.Parse(s.AccountURL); err == nil && u.RawQuery != "" {
		out = append(out, sasSecrets(u.RawQuery)...)
	}
	for _, part := range strings.Split(s.ConnectionString, ";") {
		k, v, _ := strings.Cut(part, "=")
		switch k = strings.TrimSpace(k); {
		case strings.EqualFold(k, "AccountKey"):
			out = append(out, v)
		case strings.EqualFold(k, "SharedAccessSignature"):
			out = append(out, v)
			out = append(out, sasSecrets(v)...)
		}
	}
	return out
}

// sasSecrets are the parts of a SAS token that must not be shown: the token
// without its "?", the token as a request URL carries it (url.Values
// order and escaping), and its signature, the credential itself, which an
// error quoting a request URL with other parameters around it still shows.
func sasSecrets(token string) []string {
	token = strings.TrimPrefix(token, "?")
	q, err := url.ParseQuery(token)
	if err != nil {
		return []string{token}
	}
	return append([]string{token, q.Encode()}, q["sig"]...)
}

// Open returns the store; see New.
func (s *Settings) Open(ctx context.Context, log hclog.Logger) (providers.Provider, error) {
	return New(ctx, *s, log)
}

// Validate checks the container name and the credential settings, parsing
// the connection string and the URL. It never quotes a secret.
func (s *Settings) Validate() error {
	var errs []*providers.FieldError
	name := s.Container
	if !containerNameRe.MatchString(name) || strings.Contains(name, "--") {
		errs = append(errs, providers.Fieldf("container", "Invalid container",
			"An Azure container name is 3 to 63 lowercase letters, digits and single hyphens, starting and ending with a letter or digit."))
	}
	switch {
	case s.ConnectionString != "" && s.AccountURL != "":
		errs = append(errs, providers.Fieldf("account_url", "Conflicting arguments", "Give either connection_string or account_url, not both."))
	case s.ConnectionString != "":
		if _, err := azblob.NewClientFromConnectionString(s.ConnectionString, nil); err != nil {
			errs = append(errs, providers.Fieldf("connection_string", "Invalid connection_string",
				"The connection_string is not an Azure Storage connection string, such as \"DefaultEndpointsProtocol=https;AccountName=ACCOUNT;AccountKey=KEY;EndpointSuffix=core.windows.net\"."))
		}
		if s.SASToken != "" {
			errs = append(errs, providers.Fieldf("sas_token", "Conflicting arguments", "A sas_token goes with account_url; a connection string carries its own credential."))
		}
	case s.AccountURL == "":
		errs = append(errs, providers.Fieldf("", "Missing required argument",
			"An azure_blob provider needs connection_string, or account_url (with sas_token or the default Azure credentials)."))
	default:
		u, err := url.Parse(s.AccountURL)
		switch {
		case err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "":
			errs = append(errs, providers.Fieldf("account_url", "Invalid account_url",
				"The account_url must be an http(s) URL such as \"https://ACCOUNT.blob.core.windows.net/\"."))
		case u.RawQuery != "" && s.SASToken != "":
			errs = append(errs, providers.Fieldf("account_url", "Conflicting arguments",
				"The account_url already carries a query (a SAS token?); give the token in sas_token only."))
		}
		if _, err := url.ParseQuery(strings.TrimPrefix(s.SASToken, "?")); err != nil {
			errs = append(errs, providers.Fieldf("sas_token", "Invalid sas_token",
				"The sas_token must be a URL query string, such as \"sv=2022-11-02&ss=b&srt=co&sp=rwdlac&se=...&sig=...\"."))
		}
	}
	return providers.Invalid(errs...)
}
