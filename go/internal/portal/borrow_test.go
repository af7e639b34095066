package portal

import (
	"math"
	"testing"
)

func TestLoans(t *testing.T) {
	for _, c := range []struct {
		name  string
		teams []teamUse
		total float64
		want  []loan
	}{
		{name: "nobody over their guarantee borrows nothing", total: 48,
			teams: []teamUse{{Team: "a", Guarantee: 16, Held: 10}, {Team: "b", Guarantee: 8, Held: 8}}},
		{name: "the unguaranteed pool lends first", total: 48,
			teams: []teamUse{{Team: "a", Guarantee: 16, Held: 20}, {Team: "b", Guarantee: 8, Held: 0}},
			want:  []loan{{Borrower: "a", GPUs: 4}}},
		{name: "beyond the pool, idle guarantees lend in proportion", total: 32,
			teams: []teamUse{{Team: "a", Guarantee: 16, Held: 28}, {Team: "b", Guarantee: 8, Held: 2}, {Team: "c", Guarantee: 4, Held: 2}},
			// pool 32-28 = 4; the other 8 from b (idle 6) and c (idle 2): 6 and 2.
			want: []loan{{Borrower: "a", GPUs: 4}, {Borrower: "a", Lender: "b", GPUs: 6}, {Borrower: "a", Lender: "c", GPUs: 2}}},
		{name: "two borrowers share each source by what they borrow", total: 24,
			teams: []teamUse{{Team: "a", Guarantee: 8, Held: 14}, {Team: "b", Guarantee: 8, Held: 10}, {Team: "c", Guarantee: 8, Held: 0}},
			// no pool; over 6 and 2 = 8, all from c.
			want: []loan{{Borrower: "a", Lender: "c", GPUs: 6}, {Borrower: "b", Lender: "c", GPUs: 2}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := loans(c.teams, c.total)
			if len(got) != len(c.want) {
				t.Fatalf("loans %+v; want %+v", got, c.want)
			}
			for i := range got {
				if got[i].Borrower != c.want[i].Borrower || got[i].Lender != c.want[i].Lender || math.Abs(got[i].GPUs-c.want[i].GPUs) > 1e-9 {
					t.Errorf("loan %d: %+v; want %+v", i, got[i], c.want[i])
				}
			}
			var sum, over float64
			for _, l := range got {
				sum += l.GPUs
			}
			for _, tm := range c.teams {
				over += tm.Over()
			}
			if math.Abs(sum-over) > 1e-9 {
				t.Errorf("loans add up to %v; the teams borrow %v", sum, over)
			}
		})
	}
}
