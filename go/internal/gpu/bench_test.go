package gpu

import "testing"

func BenchmarkValidate(b *testing.B) {
	m := Lookup("H100-80GB")
	l := mustLayout(b, "2g.20gb@0,1g.10gb@2,1g.10gb+me@3,3g.40gb@4")
	b.ReportAllocs()
	for b.Loop() {
		if err := m.Validate(l); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkFreePlacements(b *testing.B) {
	m := Lookup("H100-80GB")
	used := mustLayout(b, "3g.40gb@4")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := m.FreePlacements(used, "1g.10gb"); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkMaximalLayouts(b *testing.B) {
	m := Lookup("H100-80GB")
	b.ReportAllocs()
	for b.Loop() {
		m.MaximalLayouts()
	}
}

func BenchmarkLookupCanonicalName(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		Lookup("H100-80GB")
	}
}
