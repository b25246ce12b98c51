package azureblob_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/sas"

	"github.com/electd/electd/internal/teststore"
	"github.com/electd/electd/providers"
	"github.com/electd/electd/providers/azureblob"
)

// containerSAS signs a SAS for one container with the Azurite account key.
func containerSAS(t *testing.T, name string, perms sas.ContainerPermissions) string {
	t.Helper()
	cred, err := container.NewSharedKeyCredential(teststore.AzuriteAccount, teststore.AzuriteKey)
	if err != nil {
		t.Fatal(err)
	}
	qp, err := sas.BlobSignatureValues{
		Protocol:      sas.ProtocolHTTPSandHTTP,
		StartTime:     time.Now().Add(-time.Minute),
		ExpiryTime:    time.Now().Add(time.Hour),
		Permissions:   perms.String(),
		ContainerName: name,
	}.SignWithSharedKey(cred)
	if err != nil {
		t.Fatal(err)
	}
	return qp.Encode()
}

// The documented minimum for a SAS: read, write and create on an existing
// container. A read-only SAS fails with a store error, not a lease verdict;
// a container SAS cannot create a missing container.
func TestSASToken(t *testing.T) {
	t.Parallel()
	name := freshContainer(t)
	if _, err := mustRawContainer(t, name).Create(ctxT(t), nil); err != nil {
		t.Fatal(err)
	}
	rwc := containerSAS(t, name, sas.ContainerPermissions{Read: true, Write: true, Create: true})
	a := newProvider(t, azureblob.Settings{AccountURL: accountURL(t), SASToken: "?" + rwc, Container: name})
	b := newProvider(t, azureblob.Settings{AccountURL: accountURL(t), SASToken: rwc, Container: name})

	l := mustAcquire(t, a, "job", "a", ttl)
	_, err := b.Acquire(ctxT(t), providers.AcquireRequest{Key: "job", Holder: "b", TTL: ttl})
	wantHeld(t, err, "a", l.Token)
	l.Value = "slot-1"
	if l, err = a.Renew(ctxT(t), l); err != nil {
		t.Fatalf("Renew: %v", err)
	}
	if err := a.Release(ctxT(t), l); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if got, err := b.Observe(ctxT(t), "job"); err != nil || got.Holder != "" || got.Value != "slot-1" {
		t.Fatalf("Observe = %+v, %v", got, err)
	}

	ro := newProvider(t, azureblob.Settings{AccountURL: accountURL(t),
		SASToken: containerSAS(t, name, sas.ContainerPermissions{Read: true}), Container: name})
	_, err = ro.Acquire(ctxT(t), providers.AcquireRequest{Key: "job", Holder: "ro", TTL: ttl})
	if err == nil || errors.Is(err, providers.ErrHeld) || !bloberror.HasCode(err, bloberror.AuthorizationPermissionMismatch, bloberror.AuthorizationFailure) {
		t.Fatalf("Acquire with a read-only SAS: %v, want an authorization error", err)
	}

	missing := freshContainer(t)
	noContainer := newProvider(t, azureblob.Settings{AccountURL: accountURL(t),
		SASToken: containerSAS(t, missing, sas.ContainerPermissions{Read: true, Write: true, Create: true}), Container: missing})
	_, err = noContainer.Acquire(ctxT(t), providers.AcquireRequest{Key: "job", Holder: "a", TTL: ttl})
	if err == nil || !strings.Contains(err.Error(), "create container") {
		t.Fatalf("Acquire in a missing container with a container SAS: %v, want a create container error", err)
	}
}
