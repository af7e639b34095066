package portal

import "sort"

// teamUse is what a team is guaranteed and holds, in GPUs.
type teamUse struct {
	Team                   string
	Guarantee, Burst, Held float64
}

// Over is what the team holds beyond its guarantee; Idle is what it
// leaves unused of it.
func (t teamUse) Over() float64 { return max(t.Held-t.Guarantee, 0) }
func (t teamUse) Idle() float64 { return max(t.Guarantee-t.Held, 0) }

// loan is capacity one team holds beyond its guarantee, attributed to
// whom it is borrowed from; Lender "" is the capacity no team is
// guaranteed.
type loan struct {
	Borrower, Lender string
	GPUs             float64
}

// loans says who borrows how much from whom. A team over its guarantee
// borrows; what it borrows comes first from the capacity nobody is
// guaranteed (total minus every guarantee: nobody can reclaim it), then
// from the idle guarantees of teams under theirs, in proportion to how
// much each leaves idle; each borrower takes its share of each source in
// proportion to how much it borrows. (Who lends what is a convention, not
// a fact of placement: a lender reclaims by preempting borrowers, and the
// scheduler picks which.) Loans are in borrower, then lender order; the
// pool comes first.
func loans(teams []teamUse, total float64) []loan {
	var over, idle, guaranteed float64
	for _, t := range teams {
		over += t.Over()
		idle += t.Idle()
		guaranteed += t.Guarantee
	}
	if over <= 0 {
		return nil
	}
	pool := min(max(total-guaranteed, 0), over)
	fromLenders := over - pool
	var out []loan
	sorted := append([]teamUse(nil), teams...)
	sort.Slice(sorted, func(a, b int) bool { return sorted[a].Team < sorted[b].Team })
	for _, b := range sorted {
		share := b.Over() / over
		if share <= 0 {
			continue
		}
		if pool > 0 {
			out = append(out, loan{Borrower: b.Team, GPUs: pool * share})
		}
		if fromLenders <= 0 || idle <= 0 {
			continue
		}
		for _, l := range sorted {
			if l.Idle() > 0 {
				out = append(out, loan{Borrower: b.Team, Lender: l.Team, GPUs: fromLenders * share * l.Idle() / idle})
			}
		}
	}
	return out
}
