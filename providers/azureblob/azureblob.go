package azureblob

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
	"github.com/hashicorp/go-hclog"

	"github.com/electd/electd/providers"
)

var _ providers.Provider = (*Provider)(nil)

// DefaultContainer is the container used when the settings name none.
const DefaultContainer = "electd-leases"

// Provider is a lease store on one container of one storage account.
type Provider struct {
	c   *container.Client
	log hclog.Logger
}

// New returns a Provider for the account and container in s: a connection
// string; or an account URL with a SAS token; or an account URL alone, which
// authenticates with azidentity's DefaultAzureCredential (environment,
// workload identity, managed identity, Azure CLI). It does no I/O.
func New(ctx context.Context, s Settings, log hclog.Logger) (*Provider, error) {
	_ = ctx // kept for symmetry with the other providers' constructors
	if log == nil {
		log = hclog.NewNullLogger()
	}
	if s.Container == "" {
		s.Container = DefaultContainer
	}
	if err := s.Validate(); err != nil {
		return nil, fmt.Errorf("azureblob: %w", err)
	}
	name := s.Container
	svc, auth, err := newClient(s)
	if err != nil {
		return nil, err
	}
	// Never log the connection string or the SAS token: only which kind of
	// credential is in use.
	log = log.Named("azure_blob").With("container", name)
	log.Debug("opened", "auth", auth)
	return &Provider{c: svc.ServiceClient().NewContainerClient(name), log: log}, nil
}

var containerNameRe = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{1,61}[a-z0-9]$`)

// clientOptions keep the SDK's retries short: an election loop retries on its
// own schedule, and a lease call that hides a minute of retries would eat the
// leader's renewal budget. The caller's ctx still bounds every call.
func clientOptions() *azblob.ClientOptions {
	return &azblob.ClientOptions{ClientOptions: azcore.ClientOptions{
		Retry: policy.RetryOptions{
			MaxRetries:    2,
			TryTimeout:    10 * time.Second,
			RetryDelay:    200 * time.Millisecond,
			MaxRetryDelay: time.Second,
		},
		Telemetry: policy.TelemetryOptions{ApplicationID: "electd"},
	}}
}

// newClient builds the service client of validated settings and says which
// credential it uses. Errors never quote the connection string or the SAS
// token.
func newClient(s Settings) (*azblob.Client, string, error) {
	switch {
	case s.ConnectionString != "":
		c, err := azblob.NewClientFromConnectionString(s.ConnectionString, clientOptions())
		if err != nil {
			return nil, "", errors.New("azureblob: the connection_string is not a valid Azure Storage connection string")
		}
		return c, "connection_string", nil
	}
	u, err := url.Parse(s.AccountURL)
	if err != nil {
		return nil, "", errors.New("azureblob: account_url cannot be parsed") // Validate said why
	}
	if sas := strings.TrimPrefix(s.SASToken, "?"); sas != "" {
		u.RawQuery = sas
		c, err := azblob.NewClientWithNoCredential(u.String(), clientOptions())
		if err != nil {
			return nil, "", errors.New("azureblob: account_url with sas_token: cannot build a client")
		}
		return c, "sas_token", nil
	}
	if u.RawQuery != "" {
		// A SAS URL pasted into account_url: it carries its own credential.
		c, err := azblob.NewClientWithNoCredential(u.String(), clientOptions())
		if err != nil {
			return nil, "", errors.New("azureblob: account_url: cannot build a client")
		}
		return c, "sas_in_account_url", nil
	}
	cred, err := azidentity.NewDefaultAzureCredential(nil)
	if err != nil {
		return nil, "", fmt.Errorf("azureblob: default Azure credentials: %w", err)
	}
	c, err := azblob.NewClient(u.String(), cred, clientOptions())
	if err != nil {
		return nil, "", fmt.Errorf("azureblob: account_url with default credentials: %w", err)
	}
	return c, "default_azure_credential", nil
}

// Close releases nothing: the SDK's HTTP client has no per-client state to
// free, and leases are left to their holders' Release or to expiry.
func (p *Provider) Close() error { return nil }

// ensureContainer creates the container. With a SAS scoped to the container
// this fails (creating a container needs account rights): the operator
// creates the container beforehand, and this is only reached when it is
// missing.
func (p *Provider) ensureContainer(ctx context.Context) error {
	_, err := p.c.Create(ctx, nil)
	switch {
	case err == nil:
		p.log.Info("created container")
	case !bloberror.HasCode(err, bloberror.ContainerAlreadyExists):
		return fmt.Errorf("create container: %w", err)
	}
	return nil
}
