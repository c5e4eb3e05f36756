// Package clean uses API types only, which a pure package may.
package clean

import corev1 "k8s.io/api/core/v1"

// Pod is an API type.
type Pod = corev1.Pod
