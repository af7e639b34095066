package svgchart

import (
	"bytes"
	"encoding/xml"
	"strings"
	"testing"
)

func TestBarChartScalesToTheLargestAndEscapes(t *testing.T) {
	c := BarChart{Title: "cost <USD>", Width: 600, Bars: []Bar{
		{Label: "search / chat", Value: 10, Note: "10 USD"},
		{Label: "ads & co", Value: 5, Note: "5 USD"},
		{Label: "idle", Value: 0, Note: "0"},
	}}
	var b bytes.Buffer
	if err := c.Write(&b); err != nil {
		t.Fatal(err)
	}
	dec := xml.NewDecoder(bytes.NewReader(b.Bytes()))
	var widths []string
	for {
		tok, err := dec.Token()
		if err != nil {
			if err.Error() == "EOF" {
				break
			}
			t.Fatalf("not well-formed XML: %v\n%s", err, b.String())
		}
		if se, ok := tok.(xml.StartElement); ok && se.Name.Local == "rect" {
			for _, a := range se.Attr {
				if a.Name.Local == "width" && !strings.HasSuffix(a.Value, "%") {
					widths = append(widths, a.Value)
				}
			}
		}
	}
	// plot width 600-190-230 = 180: the largest is full, half is half, zero is zero.
	if strings.Join(widths, " ") != "180.0 90.0 0.0" {
		t.Errorf("bar widths %v; want 180.0 90.0 0.0", widths)
	}
	if !strings.Contains(b.String(), "cost &lt;USD&gt;") || !strings.Contains(b.String(), "ads &amp; co") {
		t.Errorf("text not escaped:\n%s", b.String())
	}
}
