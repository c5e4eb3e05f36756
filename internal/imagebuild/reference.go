package imagebuild

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/google/go-containerregistry/pkg/name"
	"sigs.k8s.io/yaml"
)

// DefaultRepository is the repository the chart installs the manager from
// by default (its values.yaml image.repository).
const DefaultRepository = "ghcr.io/sidecarset/sidecarset-manager"

// DefaultReference is the reference the chart at chartDir installs by
// default: DefaultRepository tagged with the chart's appVersion, which is
// what the chart's empty image.tag stands for.
func DefaultReference(chartDir string) (name.Tag, error) {
	p := filepath.Join(chartDir, "Chart.yaml")
	data, err := os.ReadFile(p)
	if err != nil {
		return name.Tag{}, fmt.Errorf("read the chart's appVersion: %w", err)
	}
	var chart struct {
		AppVersion string `json:"appVersion"`
	}
	if err := yaml.Unmarshal(data, &chart); err != nil {
		return name.Tag{}, fmt.Errorf("%s: %w", p, err)
	}
	if chart.AppVersion == "" {
		return name.Tag{}, fmt.Errorf("%s: appVersion is empty, and it tags the image", p)
	}
	return Reference(DefaultRepository, chart.AppVersion)
}

// Reference is repository:tag, checked.
func Reference(repository, tag string) (name.Tag, error) {
	ref, err := name.NewTag(repository+":"+tag, name.StrictValidation)
	if err != nil {
		return name.Tag{}, fmt.Errorf("image reference %s:%s: %w", repository, tag, err)
	}
	return ref, nil
}
