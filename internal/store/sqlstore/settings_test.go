package sqlstore_test

import (
	"context"
	"testing"

	"github.com/falconhq/falcon/internal/store"
)

// testRegistrySettings: unset reads "", a put replaces, "" removes.
func testRegistrySettings(t *testing.T, e env) {
	ctx := context.Background()
	steps := []struct {
		put  *string // nil: read only
		want string
	}{
		{nil, ""},
		{ptr("priority"), "priority"},
		{ptr("spread"), "spread"},
		{ptr(""), ""},
	}
	for i, st := range steps {
		if st.put != nil {
			if err := e.s.PutRegistrySetting(ctx, store.SettingSelection, *st.put); err != nil {
				t.Fatalf("step %d: put %q: %v", i, *st.put, err)
			}
		}
		got, err := e.s.RegistrySetting(ctx, store.SettingSelection)
		if err != nil || got != st.want {
			t.Fatalf("step %d: RegistrySetting = %q, %v; want %q", i, got, err, st.want)
		}
	}
	if err := e.s.PutRegistrySetting(ctx, "", "x"); err == nil {
		t.Error("PutRegistrySetting with no name: no error")
	}
}
