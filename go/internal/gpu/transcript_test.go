package gpu

import (
	"bufio"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// The catalog's H200 entry against what a real H200 reports
// (testdata/h200-nvidia-smi-mig.txt: nvidia-smi --query-gpu, mig -lgip and
// mig -lgipp, driver 580.159.04): every profile's name, instance memory,
// SMs and allowed placements, the card's memory and PCI device id.
func TestH200CatalogMatchesTheDriver(t *testing.T) {
	f, err := os.Open("testdata/h200-nvidia-smi-mig.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m := Lookup("H200-141GB")
	profileRow := regexp.MustCompile(`^\|\s+0\s+MIG (\S+)\s+(\d+)\s+\d+/\d+\s+([\d.]+)\s+\S+\s+(\d+)`)
	placementRow := regexp.MustCompile(`Profile ID\s+(\d+) Placements? : \{([\d,]+)\}:(\d+)`)
	byID := map[string]string{}
	seen := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "NVIDIA H200,") {
			fields := strings.Split(line, ", ")
			if got := fields[1]; got != strconv.FormatInt(m.MemoryMiB, 10)+" MiB" {
				t.Errorf("card memory %s, catalog %d MiB", got, m.MemoryMiB)
			}
			if id := strings.ToUpper(fields[2][:6]); !contains(m.PCIDeviceIDs, "0x"+id[2:]) {
				t.Errorf("device id %s not in the catalog's %v", fields[2], m.PCIDeviceIDs)
			}
		}
		if g := profileRow.FindStringSubmatch(line); g != nil {
			seen++
			p, err := m.Profile(g[1])
			if err != nil {
				t.Errorf("driver profile %s: %v", g[1], err)
				continue
			}
			byID[g[2]] = g[1]
			gib, _ := strconv.ParseFloat(g[3], 64)
			if want := int64(gib * 1024); p.MemoryMiB != want {
				t.Errorf("%s: catalog %d MiB, driver %s GiB", p.Name, p.MemoryMiB, g[3])
			}
			if sms, _ := strconv.Atoi(g[4]); p.SMs != sms {
				t.Errorf("%s: catalog %d SMs, driver %d", p.Name, p.SMs, sms)
			}
		}
		if g := placementRow.FindStringSubmatch(line); g != nil {
			p, err := m.Profile(byID[g[1]])
			if err != nil {
				t.Errorf("placements of profile id %s: %v", g[1], err)
				continue
			}
			var starts []string
			for _, st := range p.Starts {
				starts = append(starts, strconv.Itoa(st))
			}
			if strings.Join(starts, ",") != g[2] || strconv.Itoa(p.Memory) != g[3] {
				t.Errorf("%s: catalog starts %v width %d, driver {%s}:%s", p.Name, p.Starts, p.Memory, g[2], g[3])
			}
		}
	}
	if seen != len(m.Profiles) {
		t.Errorf("driver lists %d profiles, catalog has %d", seen, len(m.Profiles))
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if strings.EqualFold(x, s) {
			return true
		}
	}
	return false
}
