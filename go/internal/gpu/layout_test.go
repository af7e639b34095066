package gpu

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestParsePlacement(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    Placement
		wantErr string
	}{
		{"reads profile and start", "3g.40gb@4", Placement{"3g.40gb", 4}, ""},
		{"reads a +me profile", "1g.10gb+me@0", Placement{"1g.10gb+me", 0}, ""},
		{"ignores surrounding spaces", " 2g.20gb@2 ", Placement{"2g.20gb", 2}, ""},
		{"reads a leading zero", "1g.10gb@06", Placement{"1g.10gb", 6}, ""},
		{"rejects a missing @", "3g.40gb", Placement{}, `placement "3g.40gb": want <profile>@<start>`},
		{"rejects a missing profile", "@4", Placement{}, "want <profile>@<start>"},
		{"rejects a missing start", "3g.40gb@", Placement{}, "want <profile>@<start>"},
		{"rejects a start past the last slice", "3g.40gb@8", Placement{}, `start "8" is not a memory-slice index from 0 to 7`},
		{"rejects a negative start", "3g.40gb@-1", Placement{}, `start "-1" is not a memory-slice index`},
		{"rejects a signed start", "3g.40gb@+1", Placement{}, `start "+1" is not a memory-slice index`},
		{"rejects a second @", "3g.40gb@4@4", Placement{}, `start "4@4"`},
		{"rejects a comma in the profile", "3g,40gb@4", Placement{}, `profile "3g,40gb" may hold only`},
		{"rejects spaces inside", "3g.40gb @4", Placement{}, `profile "3g.40gb " may hold only`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParsePlacement(tt.in)
			checkErr(t, err, tt.wantErr)
			if got != tt.want {
				t.Fatalf("ParsePlacement(%q) = %+v, want %+v", tt.in, got, tt.want)
			}
		})
	}
}

func TestParseLayout(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    string // String() of the result
		wantLen int
		wantErr string
	}{
		{"reads the empty string as the empty layout", "", "", 0, ""},
		{"reads blanks as the empty layout", "  ", "", 0, ""},
		{"reads one placement", "7g.80gb@0", "7g.80gb@0", 1, ""},
		{"reads several placements with spaces", "4g.40gb@0, 2g.20gb@4 ,1g.10gb@6", "4g.40gb@0,2g.20gb@4,1g.10gb@6", 3, ""},
		{"rejects an empty placement", "4g.40gb@0,,1g.10gb@6", "", 0, `layout "4g.40gb@0,,1g.10gb@6": placement 2 is empty`},
		{"rejects a trailing comma", "4g.40gb@0,", "", 0, "placement 2 is empty"},
		{"names the bad placement", "4g.40gb@0,2g.20gb", "", 0, `placement "2g.20gb": want <profile>@<start>`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseLayout(tt.in)
			checkErr(t, err, tt.wantErr)
			if got.String() != tt.want || len(got) != tt.wantLen {
				t.Fatalf("ParseLayout(%q) = %q (%d), want %q (%d)", tt.in, got, len(got), tt.want, tt.wantLen)
			}
		})
	}
}

func TestLayoutJSON(t *testing.T) {
	l := Layout{{"3g.40gb", 0}, {"2g.20gb", 4}}
	b, err := json.Marshal(l)
	if err != nil {
		t.Fatal(err)
	}
	want := `[{"profile":"3g.40gb","start":0},{"profile":"2g.20gb","start":4}]`
	if string(b) != want {
		t.Fatalf("json = %s, want %s", b, want)
	}
	if e, _ := json.Marshal(mustLayout(t, "")); strings.TrimSpace(string(e)) != "[]" {
		t.Fatalf("empty layout marshals as %s, want []", e)
	}
}
