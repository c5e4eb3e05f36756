package controller

import (
	"fmt"
	"strings"
	"testing"
)

func TestPodList(t *testing.T) {
	many := make([]string, 1000)
	for i := range many {
		many[i] = fmt.Sprintf("shop/db-%04d", i)
	}
	tests := []struct {
		name  string
		names []string
		want  string
	}{
		{"none", nil, ""},
		{"a few, all named", []string{"shop/db-0", "shop/db-1"}, "shop/db-0, shop/db-1"},
		// 600 bytes hold 43 names of 12 bytes with their separators.
		{"a thousand, the rest counted", many, strings.Join(many[:43], ", ") + " and 957 more"},
		{"one name longer than the limit still shows", []string{strings.Repeat("x", 700)}, strings.Repeat("x", 700)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := podList(tt.names); got != tt.want {
				t.Errorf("podList = %q\nwant %q", got, tt.want)
			}
			// The longest event message around it is under 200 bytes.
			if got := podList(tt.names); len(tt.names) > 1 && len(got) > 1024-200 {
				t.Errorf("podList is %d bytes, too long for an event message", len(got))
			}
		})
	}
}
