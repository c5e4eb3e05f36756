package cli

import (
	"io"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/printers"

	sidecarscheme "github.com/sidecarset/sidecarset/internal/scheme"
)

// Output formats of the read verbs, as kubectl spells them.
const (
	OutputTable = ""
	OutputWide  = "wide"
	OutputJSON  = "json"
	OutputYAML  = "yaml"
)

// outputFormats lists the -o values besides the tables, as kubectl get
// takes them.
const outputFormats = "json, yaml, name, jsonpath=TEMPLATE, jsonpath-as-json=TEMPLATE, jsonpath-file=FILE, go-template=TEMPLATE, go-template-file=FILE"

// validateOutput checks an -o value: a table, or what printObject prints
// (a template that does not parse is refused here, before any read).
func validateOutput(format string) error {
	if isTable(format) {
		return nil
	}
	if _, err := objectPrinter(format); err != nil {
		if genericclioptions.IsNoCompatiblePrinterError(err) {
			return usageErrorf("--output %q: must be one of wide, %s", format, outputFormats)
		}
		return usageErrorf("--output %q: %v", format, err)
	}
	return nil
}

// isTable reports whether format prints a table rather than objects.
func isTable(format string) bool { return format == OutputTable || format == OutputWide }

// printTable prints t as kubectl get does; columns with priority 1 only
// with -o wide.
func printTable(w io.Writer, t *metav1.Table, wide bool) error {
	return printers.NewTablePrinter(printers.PrintOptions{Wide: wide}).PrintObj(t, w)
}

// printObject prints obj as kubectl get -o format does (JSON, YAML, its
// name, a JSONPath or Go template), with apiVersion and kind filled from
// the project's scheme (the client leaves them empty on typed objects).
func printObject(w io.Writer, obj runtime.Object, format string) error {
	p, err := objectPrinter(format)
	if err != nil {
		return err
	}
	return p.PrintObj(obj, w)
}

func objectPrinter(format string) (printers.ResourcePrinter, error) {
	f := genericclioptions.NewPrintFlags("").WithTypeSetter(sidecarscheme.New())
	f.OutputFormat = &format
	return f.ToPrinter()
}

// column defines a table column; wide ones show with -o wide only.
func column(name, description string, wide bool) metav1.TableColumnDefinition {
	c := metav1.TableColumnDefinition{Name: name, Type: "string", Description: description}
	if wide {
		c.Priority = 1
	}
	return c
}

// age spells the time since t as kubectl does ("5m", "2d3h"), "<unknown>"
// for a zero time.
func age(t metav1.Time, now time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(t.Time))
}

// orNone spells an empty list cell as kubectl does.
func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}

// joined joins cells of several sidecars with commas, in order.
func joined(values []string) string { return orNone(strings.Join(values, ",")) }
