package v1alpha1

import (
	"os"
	"reflect"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// TestCRDsMatchTypes checks that deploy/kubernetes/crds.yaml declares
// every field of the Go types, and no other: the schema is written by
// hand, so this is what keeps the two together. (That the API server
// enforces the schema is tested in test/integration.)
func TestCRDsMatchTypes(t *testing.T) {
	data, err := os.ReadFile("../../../../../deploy/kubernetes/crds.yaml")
	if err != nil {
		t.Fatal(err)
	}
	schemas := map[string]map[string]any{}
	dec := yaml.NewDecoder(strings.NewReader(string(data)))
	for {
		var doc map[string]any
		if err := dec.Decode(&doc); err != nil {
			break
		}
		spec := doc["spec"].(map[string]any)
		kind := spec["names"].(map[string]any)["kind"].(string)
		v := spec["versions"].([]any)[0].(map[string]any)
		schemas[kind] = v["schema"].(map[string]any)["openAPIV3Schema"].(map[string]any)
	}
	for kind, typ := range map[string]reflect.Type{"Queue": reflect.TypeOf(Queue{}), "PodGroup": reflect.TypeOf(PodGroup{})} {
		s, ok := schemas[kind]
		if !ok {
			t.Fatalf("no CRD for %s", kind)
		}
		for _, part := range []string{"Spec", "Status"} {
			f, _ := typ.FieldByName(part)
			props := s["properties"].(map[string]any)[strings.ToLower(part)].(map[string]any)["properties"].(map[string]any)
			fields := map[string]bool{}
			for i := 0; i < f.Type.NumField(); i++ {
				name, _, _ := strings.Cut(f.Type.Field(i).Tag.Get("json"), ",")
				fields[name] = true
				if _, ok := props[name]; !ok {
					t.Errorf("%s.%s.%s is not in the CRD schema", kind, part, name)
				}
			}
			for name := range props {
				if !fields[name] {
					t.Errorf("the CRD schema of %s.%s has %s, the Go type does not", kind, part, name)
				}
			}
		}
	}
}
