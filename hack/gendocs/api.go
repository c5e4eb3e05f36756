package main

import (
	"bytes"
	"fmt"
	"reflect"
	"slices"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
)

// apiReference returns the API reference page of the CRD crd: for each
// version, every field of spec and status with its type and description,
// depth first, as `kubectl explain --recursive` walks them. A field of one
// of Kubernetes' own types (a Volume, a LabelSelector, the Container a
// sidecar embeds) is listed, not walked: its reference is Kubernetes'.
func apiReference(crd []byte) ([]byte, error) {
	var def apiextensionsv1.CustomResourceDefinition
	if err := yaml.UnmarshalStrict(crd, &def); err != nil {
		return nil, err
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "# %s API reference\n\n", def.Spec.Names.Kind)
	fmt.Fprintf(&b, "Generated from the CRD (`make manifests`), which carries the Go types' comments: "+
		"`kubectl explain %s.spec` shows the same. Group `%s`, kind `%s`, scope %s.\n",
		strings.ToLower(def.Spec.Names.Kind), def.Spec.Group, def.Spec.Names.Kind, def.Spec.Scope)
	set := reflect.TypeFor[v1alpha1.SidecarSet]()
	for _, v := range def.Spec.Versions {
		fmt.Fprintf(&b, "\n## %s/%s\n", def.Spec.Group, v.Name)
		s := v.Schema.OpenAPIV3Schema
		for _, top := range []string{"spec", "status"} {
			prop, ok := s.Properties[top]
			f, found := fieldNamed(set, top)
			if !ok || !found {
				continue
			}
			fmt.Fprintf(&b, "\n### %s\n\n%s\n\n", top, describe(prop.Description))
			fmt.Fprintln(&b, "| field | type | description |")
			fmt.Fprintln(&b, "|---|---|---|")
			fields(&b, top, prop, elem(f.Type))
		}
	}
	return b.Bytes(), nil
}

// fields writes a row for each property of s, a schema of the Go type t,
// under path, each followed by those of its own properties.
func fields(b *bytes.Buffer, path string, s apiextensionsv1.JSONSchemaProps, t reflect.Type) {
	names := make([]string, 0, len(s.Properties))
	for name := range s.Properties {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		p := s.Properties[name]
		at := path + "." + name
		item := p
		if p.Type == "array" && p.Items != nil && p.Items.Schema != nil {
			item = *p.Items.Schema
			at += "[]"
		}
		head := fmt.Sprintf("| `%s` | %s |", at, typeOf(p))
		if slices.Contains(s.Required, name) {
			head = fmt.Sprintf("| `%s` | %s (required) |", at, typeOf(p))
		}
		f, found := fieldNamed(t, name)
		switch {
		case found && !ours(f.declaredIn):
			// A field of the Kubernetes type one of ours embeds.
			fmt.Fprintf(b, "%s as in Kubernetes' %s |\n", head, f.declaredIn.Name())
		case found && len(item.Properties) > 0 && !ours(elem(f.Type)):
			fmt.Fprintf(b, "%s %s (Kubernetes' %s) |\n", head, describe(p.Description), elem(f.Type).Name())
		default:
			fmt.Fprintf(b, "%s %s |\n", head, describe(p.Description))
			fields(b, at, item, elem(f.Type))
		}
	}
}

// goField is a struct field found by its JSON name, with the struct type
// that declares it: an embedded (inline) one's when it is promoted.
type goField struct {
	reflect.StructField
	declaredIn reflect.Type
}

// fieldNamed finds the field of struct type t that JSON names name.
func fieldNamed(t reflect.Type, name string) (goField, bool) {
	if t == nil || t.Kind() != reflect.Struct {
		return goField{}, false
	}
	for f := range t.Fields() {
		tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if tag == "" && f.Anonymous {
			if g, ok := fieldNamed(elem(f.Type), name); ok {
				return g, true
			}
			continue
		}
		if tag == name {
			return goField{f, t}, true
		}
	}
	return goField{}, false
}

// elem is t without pointers, slices and maps: the type a schema's object
// or item describes.
func elem(t reflect.Type) reflect.Type {
	for t != nil && (t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Map) {
		t = t.Elem()
	}
	return t
}

// ours reports whether t is declared in this API's package.
func ours(t reflect.Type) bool {
	return t != nil && t.PkgPath() == reflect.TypeFor[v1alpha1.SidecarSet]().PkgPath()
}

// typeOf is a property's type as kubectl explain names it.
func typeOf(p apiextensionsv1.JSONSchemaProps) string {
	switch {
	case p.XIntOrString:
		return "int or string"
	case p.Type == "array" && p.Items != nil && p.Items.Schema != nil:
		return "[]" + typeOf(*p.Items.Schema)
	case p.Type == "object" && p.AdditionalProperties != nil && p.AdditionalProperties.Schema != nil:
		return "map[string]" + typeOf(*p.AdditionalProperties.Schema)
	case p.Type == "":
		return "any"
	}
	return p.Type
}

// describe makes a description one table cell: lines joined, pipes escaped.
func describe(d string) string {
	d = strings.Join(strings.Fields(d), " ")
	return strings.ReplaceAll(d, "|", `\|`)
}
