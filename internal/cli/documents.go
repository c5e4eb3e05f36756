package cli

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"

	utiljson "k8s.io/apimachinery/pkg/util/json"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// document is one document of a multi-document YAML (or JSON) input.
type document struct {
	// raw is the document as read, so one left alone prints as it came.
	raw []byte
	// obj is the document as JSON values (integers as int64), nil for a
	// document of comments only.
	obj map[string]any
	// index counts documents from 1, for messages.
	index int
}

// kind returns the document's apiVersion and kind.
func (d document) kind() (apiVersion, kind string) {
	apiVersion, _ = d.obj["apiVersion"].(string)
	kind, _ = d.obj["kind"].(string)
	return apiVersion, kind
}

// describe names the document in messages: "Deployment shop/web", or
// "document 3" when it has no kind or name.
func (d document) describe() string {
	_, kind := d.kind()
	meta, _ := d.obj["metadata"].(map[string]any)
	name, _ := meta["name"].(string)
	if name == "" {
		name, _ = meta["generateName"].(string)
	}
	if ns, _ := meta["namespace"].(string); ns != "" && name != "" {
		name = ns + "/" + name
	}
	if kind == "" || name == "" {
		return fmt.Sprintf("document %d", d.index)
	}
	return kind + " " + name
}

// openInput opens the -f argument: a file, or standard input for "-".
func openInput(path string, stdin io.Reader) (io.ReadCloser, error) {
	if path == "-" {
		return io.NopCloser(stdin), nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("-f %s: %w", path, err)
	}
	return f, nil
}

// readDocuments splits r into documents; source names r in errors.
func readDocuments(r io.Reader, source string) ([]document, error) {
	yr := utilyaml.NewYAMLReader(bufio.NewReader(r))
	var docs []document
	for i := 1; ; i++ {
		raw, err := yr.Read()
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", source, err)
		}
		raw = bytes.TrimSpace(raw)
		if len(raw) == 0 {
			continue
		}
		j, err := yaml.YAMLToJSON(raw)
		if err != nil {
			return nil, fmt.Errorf("%s, document %d: %w", source, i, err)
		}
		d := document{raw: raw, index: i}
		if !bytes.Equal(bytes.TrimSpace(j), []byte("null")) {
			// util/json keeps integers as int64, as unstructured objects do.
			if err := utiljson.Unmarshal(j, &d.obj); err != nil {
				return nil, fmt.Errorf("%s, document %d: not an object: %w", source, i, err)
			}
		}
		docs = append(docs, d)
	}
}

// writeDocuments writes docs as one multi-document YAML stream.
func writeDocuments(w io.Writer, docs [][]byte) error {
	for i, d := range docs {
		if i > 0 {
			if _, err := io.WriteString(w, "---\n"); err != nil {
				return err
			}
		}
		d = bytes.TrimRight(d, "\n")
		if _, err := w.Write(append(d, '\n')); err != nil {
			return err
		}
	}
	return nil
}

// marshal writes obj as YAML.
func marshal(obj map[string]any) ([]byte, error) {
	b, err := yaml.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("encode YAML: %w", err)
	}
	return b, nil
}
