package testenv

import (
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"path/filepath"

	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/keyutil"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// ServiceIPRange is the apiserver's Service range (envtest's own
// default, set explicitly so that a node can route to it), and
// KubernetesServiceIP the ClusterIP of the `kubernetes` Service in it: its
// first address, which pods reach the apiserver by (KUBERNETES_SERVICE_HOST).
const (
	ServiceIPRange      = "10.0.0.0/24"
	KubernetesServiceIP = "10.0.0.1"
)

// serveOn makes the apiserver listen on address and advertise it, with a
// serving certificate a pod's in-cluster client accepts: envtest's own
// names only localhost and the listening address, while a pod dials the
// `kubernetes` Service by its ClusterIP. The certificates, and the service
// account signing key envtest would write beside them, go to dir, which
// becomes the apiserver's certificate folder.
func serveOn(env *envtest.Environment, address, dir string) error {
	ip := net.ParseIP(address)
	if ip == nil {
		return fmt.Errorf("serving address %q is not an IP address", address)
	}
	l, err := net.Listen("tcp", net.JoinHostPort(address, "0"))
	if err != nil {
		return fmt.Errorf("find a free port on %s: %w", address, err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()

	certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey("localhost",
		[]net.IP{net.ParseIP("127.0.0.1"), ip, net.ParseIP(KubernetesServiceIP)},
		[]string{"kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"})
	if err != nil {
		return fmt.Errorf("make the apiserver's serving certificate: %w", err)
	}
	// The serving certificate comes first, then the CA that signed it.
	_, rest := pem.Decode(certPEM)
	caBlock, _ := pem.Decode(rest)
	if caBlock == nil {
		return fmt.Errorf("the apiserver's serving certificate has no CA after it")
	}
	saKey, err := keyutil.MakeEllipticPrivateKeyPEM()
	if err != nil {
		return fmt.Errorf("make the service account signing key: %w", err)
	}
	for name, data := range map[string][]byte{"apiserver.crt": certPEM, "apiserver.key": keyPEM, saSignerKey: saKey} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			return err
		}
	}

	apiserver := env.ControlPlane.GetAPIServer()
	apiserver.CertDir = dir
	apiserver.Address = address
	apiserver.Port = fmt.Sprint(port)
	// envtest writes the certificates only into a folder without them; it
	// then takes the CA from what it wrote, here from what is given.
	apiserver.CA = pem.EncodeToMemory(caBlock)
	args := apiserver.Configure()
	args.Set("advertise-address", address)
	// A private key holds its public key: the apiserver reads it as one.
	args.Set("service-account-key-file", filepath.Join(dir, saSignerKey))
	return nil
}

// saSignerKey is the service account signing key in the apiserver's
// certificate folder; kube-controller-manager signs tokens with it too.
const saSignerKey = "sa-signer.key"
