package kube

import (
	"reflect"
	"strings"
	"testing"
)

func TestMIGPartedRoundTrip(t *testing.T) {
	gpus := []GPUConfig{
		{MIG: false}, {MIG: false},
		{MIG: true, Counts: map[string]int{"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}},
		{MIG: true, Counts: map[string]int{"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}},
	}
	name := ConfigName(gpus)
	c := &MIGParted{Version: "v1", MIGConfigs: map[string][]MIGDeviceSpec{name: DeviceSpecs(gpus), "all-disabled": {{Devices: Devices{All: true}}}}}
	data, err := c.Render()
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	for _, want := range []string{"version: v1", "devices: [0, 1]", "devices: [2, 3]", "mig-enabled: true", "3g.40gb: 1", "devices: all"} {
		if !strings.Contains(text, want) {
			t.Errorf("rendered config lacks %q:\n%s", want, text)
		}
	}
	back, err := ParseMIGParted(data)
	if err != nil {
		t.Fatal(err)
	}
	got, ok, err := ExpandSpecs(back.MIGConfigs[name], 4)
	if err != nil {
		t.Fatal(err)
	}
	for i := range gpus {
		if !ok[i] || got[i].key() != gpus[i].key() {
			t.Errorf("GPU %d: %+v (named %v), want %+v", i, got[i], ok[i], gpus[i])
		}
	}
	if ConfigName(got) != name {
		t.Errorf("name after a round trip %s, want %s", ConfigName(got), name)
	}
}

func TestConfigNameIsContentAddressed(t *testing.T) {
	a := []GPUConfig{{MIG: true, Counts: map[string]int{"1g.10gb": 7}}}
	b := []GPUConfig{{MIG: true, Counts: map[string]int{"1g.10gb": 7, "2g.20gb": 0}}}
	c := []GPUConfig{{MIG: true, Counts: map[string]int{"1g.10gb": 6}}}
	if ConfigName(a) != ConfigName(b) {
		t.Error("zero counts change the name")
	}
	if ConfigName(a) == ConfigName(c) {
		t.Error("different layouts share a name")
	}
	if !strings.HasPrefix(ConfigName(a), "partita-") {
		t.Error("name lacks the partita- prefix the garbage collector relies on")
	}
}

func TestDeviceSpecsOneGroupIsAll(t *testing.T) {
	specs := DeviceSpecs([]GPUConfig{{MIG: false}, {MIG: false}})
	want := []MIGDeviceSpec{{Devices: Devices{All: true}, MIGEnabled: false}}
	if !reflect.DeepEqual(specs, want) {
		t.Fatalf("%+v, want %+v", specs, want)
	}
}

func TestParseMIGPartedErrors(t *testing.T) {
	for _, text := range []string{
		"version: v2\nmig-configs: {}\n",
		"version: v1\nmig-configs:\n  x:\n    - devices: some\n",
		"version: v1\nmig-configs:\n  x:\n    - devices: [-1]\n",
		": not yaml",
	} {
		if _, err := ParseMIGParted([]byte(text)); err == nil {
			t.Errorf("accepted %q", text)
		}
	}
	if _, _, err := ExpandSpecs([]MIGDeviceSpec{{Devices: Devices{Indices: []int{8}}}}, 8); err == nil {
		t.Error("device 8 of 8 accepted")
	}
}

func FuzzParseMIGParted(f *testing.F) {
	f.Add("version: v1\nmig-configs:\n  all-disabled:\n    - devices: all\n      mig-enabled: false\n")
	f.Add("version: v1\nmig-configs:\n  a:\n    - devices: [0, 1]\n      mig-enabled: true\n      mig-devices: {\"1g.10gb\": 7}\n")
	f.Fuzz(func(t *testing.T, text string) {
		c, err := ParseMIGParted([]byte(text))
		if err != nil {
			return
		}
		data, err := c.Render()
		if err != nil {
			t.Fatalf("parsed config does not render: %v", err)
		}
		if _, err := ParseMIGParted(data); err != nil {
			t.Fatalf("rendered config does not parse: %v\n%s", err, data)
		}
	})
}

// The GPU Operator's default config restricts entries to GPU models with
// device-filter; a config seeded from it must keep them when Partita adds
// a layout, or every model's entry would apply to every GPU.
func TestMIGPartedKeepsDeviceFilters(t *testing.T) {
	stock := `version: v1
mig-configs:
  all-disabled:
    - devices: all
      mig-enabled: false
  all-1g.10gb:
    - device-filter: ["0x20B010DE", "0x20B110DE"]
      devices: all
      mig-enabled: true
      mig-devices:
        "1g.5gb": 7
    - device-filter: "0x233010DE"
      devices: all
      mig-enabled: true
      mig-devices:
        "1g.10gb": 7
`
	c, err := ParseMIGParted([]byte(stock))
	if err != nil {
		t.Fatal(err)
	}
	gpus := []GPUConfig{{MIG: true, Counts: map[string]int{"3g.40gb": 2}}}
	c.MIGConfigs[ConfigName(gpus)] = DeviceSpecs(gpus)
	data, err := c.Render()
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	for _, want := range []string{`device-filter: ["0x20B010DE", "0x20B110DE"]`, `device-filter: "0x233010DE"`} {
		if !strings.Contains(text, want) {
			t.Errorf("rewritten config lacks %s:\n%s", want, text)
		}
	}
	if n := strings.Count(text, "device-filter"); n != 2 {
		t.Errorf("%d device filters, want 2 (none on Partita's entry):\n%s", n, text)
	}
	back, err := ParseMIGParted(data)
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := back.Render(); string(again) != text {
		t.Errorf("a second round trip changed the file:\n%s\nthen:\n%s", text, again)
	}
}
