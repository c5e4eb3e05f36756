// Package direct imports a client itself.
package direct

import "sigs.k8s.io/controller-runtime/pkg/client"

// Reader is a client type, which a pure package must not use.
type Reader = client.Reader
