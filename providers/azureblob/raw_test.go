package azureblob_test

import (
	"context"
	"os"
	"regexp"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
)

// Direct access to the Azurite account, to do what a provider never does:
// break a lease, take one without writing a record, mint SAS tokens.

func rawContainer(name string) (*container.Client, error) {
	c, err := azblob.NewClientFromConnectionString(os.Getenv(connEnv), nil)
	if err != nil {
		return nil, err
	}
	return c.ServiceClient().NewContainerClient(name), nil
}

func mustRawContainer(t *testing.T, name string) *container.Client {
	t.Helper()
	c, err := rawContainer(name)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func deleteContainer(ctx context.Context, name string) error {
	c, err := rawContainer(name)
	if err != nil {
		return err
	}
	_, err = c.Delete(ctx, nil)
	return err
}

var blobEndpointRe = regexp.MustCompile(`BlobEndpoint=([^;]+)`)

// accountURL is the blob endpoint of the Azurite account.
func accountURL(t *testing.T) string {
	t.Helper()
	m := blobEndpointRe.FindStringSubmatch(os.Getenv(connEnv))
	if m == nil {
		t.Fatal("no BlobEndpoint in the connection string")
	}
	return m[1]
}
