package portal

import (
	"net/http"
	"net/url"

	"partita.dev/partita/internal/api"
)

// queueData is every visible team's queue, and who borrows from whom.
type queueData struct {
	Queue   api.Queue
	Teams   []teamUse // the teams the viewer may see
	Loans   []loan    // those the viewer's team takes part in (all, for an admin)
	Total   float64   // GPUs in the cluster
	Admin   bool
	MyTeam  string
	Waiting int
}

func (p *Portal) queuePage(w http.ResponseWriter, r *http.Request, s *session) error {
	d, err := p.queueData(r, s)
	if err != nil {
		return err
	}
	p.render(w, http.StatusOK, "queue", p.view(s, "queue", "Queues", d))
	return nil
}

func (p *Portal) queueFragment(w http.ResponseWriter, r *http.Request, s *session) error {
	d, err := p.queueData(r, s)
	if err != nil {
		return err
	}
	p.fragment(w, "queue", "queue-live", p.view(s, "queue", "Queues", d))
	return nil
}

func (p *Portal) queueData(r *http.Request, s *session) (*queueData, error) {
	path := api.Prefix + "/queue"
	if t := r.URL.Query().Get("team"); t != "" {
		path += "?team=" + url.QueryEscape(t)
	}
	d := &queueData{Admin: s.who.Role == api.RoleAdmin, MyTeam: s.who.Team}
	if err := p.as(r, s, http.MethodGet, path, nil, &d.Queue); err != nil {
		return nil, err
	}
	for _, tq := range d.Queue.Teams {
		d.Waiting += len(tq.Jobs)
	}
	uses, total, err := p.teamUses(r)
	if err != nil {
		return nil, err
	}
	d.Total = total
	for _, u := range uses {
		if d.Admin || u.Team == s.who.Team {
			d.Teams = append(d.Teams, u)
		}
	}
	for _, l := range loans(uses, total) {
		if d.Admin || l.Borrower == s.who.Team || l.Lender == s.who.Team {
			d.Loans = append(d.Loans, l)
		}
	}
	return d, nil
}

// teamUses reads every team's guarantee and burst (the store) and what it
// holds now (the world, as /metrics shows it), and the cluster's GPUs.
func (p *Portal) teamUses(r *http.Request) ([]teamUse, float64, error) {
	teams, err := p.cfg.Store.Teams(r.Context())
	if err != nil {
		return nil, 0, err
	}
	st := p.cfg.World.Stats()
	out := make([]teamUse, 0, len(teams))
	for _, t := range teams {
		out = append(out, teamUse{Team: t.Name, Guarantee: float64(t.GuaranteeMilli) / 1000, Burst: float64(t.BurstMilli) / 1000, Held: st.Held[t.Name]})
	}
	return out, float64(st.GPUs), nil
}
