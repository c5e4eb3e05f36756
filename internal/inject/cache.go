package inject

import (
	"errors"
	"fmt"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/sidecarset/sidecarset/api/v1alpha1"
	"github.com/sidecarset/sidecarset/internal/revision"
)

// Cache remembers what Inject and Matches derive from one version of a
// SidecarSet alone: its parsed selectors and its revision hashes. Hashing a
// spec costs more than all the rest of an injection, and a webhook sees the
// same few versions for every pod it admits.
//
// A version is the pair (UID, resourceVersion), which the apiserver changes
// on every write, so an entry never outlives the object it was derived from.
// Sets without both (read from files, built in tests) are never cached. The
// zero Cache is ready to use and safe for concurrent use; it holds one entry
// per SidecarSet name it has seen.
type Cache struct {
	mu      sync.RWMutex
	entries map[string]*compiled
}

// compiled is what one version of a SidecarSet yields on its own.
type compiled struct {
	uid             types.UID
	resourceVersion string

	// Both namespace fields are nil when the set has no namespaceSelector.
	// An error says which selector is wrong and why.
	namespaceSelector    labels.Selector
	namespaceSelectorErr error
	selector             labels.Selector
	selectorErr          error

	// head is the set's record without containers; computed on first use,
	// since most sets match few pods.
	head func() revision.SetState
}

// compiled returns set's entry, from c when c is non-nil and holds set's
// version.
func (c *Cache) compiled(set *v1alpha1.SidecarSet) *compiled {
	if c == nil || set.UID == "" || set.ResourceVersion == "" {
		return compile(set, set.Spec)
	}
	c.mu.RLock()
	e := c.entries[set.Name]
	c.mu.RUnlock()
	if e != nil && e.uid == set.UID && e.resourceVersion == set.ResourceVersion {
		return e
	}
	// The entry outlives this call, so it hashes its own copy of the spec
	// rather than an object the caller may reuse.
	e = compile(set, *set.Spec.DeepCopy())
	c.mu.Lock()
	if c.entries == nil {
		c.entries = map[string]*compiled{}
	}
	c.entries[set.Name] = e
	c.mu.Unlock()
	return e
}

// errEmptySelector refuses what apimachinery would read as "everything": the
// API requires a selector, and an empty one would inject every pod.
var errEmptySelector = errors.New("selector is empty, which would select every pod")

func compile(set *v1alpha1.SidecarSet, spec v1alpha1.SidecarSetSpec) *compiled {
	e := &compiled{uid: set.UID, resourceVersion: set.ResourceVersion}
	var err error
	if spec.NamespaceSelector != nil {
		if e.namespaceSelector, err = metav1.LabelSelectorAsSelector(spec.NamespaceSelector); err != nil {
			e.namespaceSelectorErr = fmt.Errorf("namespaceSelector: %w", err)
		}
	}
	if sel := spec.Selector; sel == nil || len(sel.MatchLabels) == 0 && len(sel.MatchExpressions) == 0 {
		e.selectorErr = errEmptySelector
	} else if e.selector, err = metav1.LabelSelectorAsSelector(sel); err != nil {
		e.selectorErr = fmt.Errorf("selector: %w", err)
	}
	name := set.Name
	e.head = sync.OnceValue(func() revision.SetState {
		return revision.SetState{
			Revision:      revision.Name(name, &spec),
			Hash:          revision.Hash(&spec),
			ImagelessHash: revision.ImagelessHash(&spec),
		}
	})
	return e
}
