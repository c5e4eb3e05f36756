package testenv

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	"github.com/sidecarset/sidecarset/config"
)

// WebhookOptions returns the project's webhook configurations, as checked in
// under config/webhook, ready for Options.Webhooks: envtest points them at a
// local port with a generated CA. failurePolicy, if not empty, replaces the
// pod webhook's failure policy.
func WebhookOptions(failurePolicy admissionregistrationv1.FailurePolicyType) (*envtest.WebhookInstallOptions, error) {
	opts := &envtest.WebhookInstallOptions{}
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(config.Webhooks)))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("read webhook manifests: %w", err)
		}
		var meta struct {
			Kind string `json:"kind"`
		}
		if err := yaml.Unmarshal(doc, &meta); err != nil {
			return nil, fmt.Errorf("read webhook manifests: %w", err)
		}
		switch meta.Kind {
		case "MutatingWebhookConfiguration":
			m := &admissionregistrationv1.MutatingWebhookConfiguration{}
			if err := yaml.UnmarshalStrict(doc, m); err != nil {
				return nil, fmt.Errorf("decode %s: %w", meta.Kind, err)
			}
			if failurePolicy != "" {
				for i := range m.Webhooks {
					if m.Webhooks[i].Name == "pods.sidecarset.dev" {
						m.Webhooks[i].FailurePolicy = &failurePolicy
					}
				}
			}
			opts.MutatingWebhooks = append(opts.MutatingWebhooks, m)
		case "ValidatingWebhookConfiguration":
			v := &admissionregistrationv1.ValidatingWebhookConfiguration{}
			if err := yaml.UnmarshalStrict(doc, v); err != nil {
				return nil, fmt.Errorf("decode %s: %w", meta.Kind, err)
			}
			opts.ValidatingWebhooks = append(opts.ValidatingWebhooks, v)
		case "":
		default:
			return nil, fmt.Errorf("unexpected kind %q in webhook manifests", meta.Kind)
		}
	}
	return opts, nil
}
