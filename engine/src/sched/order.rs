//! The order in which a cycle considers the pending jobs: claims within
//! their team's guarantee first (with `guarantee_first`), then by class,
//! then by the team's fair share (or dominant share), then by submission
//! and ID.

use std::cmp::Ordering;
use std::collections::BTreeMap;

use super::Scheduler;
use super::config::Order;
use super::snapshot::Cycle;
use super::types::{Job, Nanos, Phase, READ_AHEAD};
use crate::workload::Class;

/// The arrays `group_order` reuses from cycle to cycle (a backlog's were an
/// eighth of what a week-1000 run allocated in the Go build).
#[derive(Debug, Default)]
pub(super) struct OrderBuffers {
    groups: Vec<OrderGroup>,
    group_of: Vec<usize>,
    used: Vec<usize>,
    starts: Vec<usize>,
    sorted: Vec<usize>,
}

/// A pending job with its keys in the cycle's order, each copied from the
/// job: the sort compares every two jobs many times.
#[derive(Debug, Clone, Copy)]
struct OrderKey<'a> {
    j: &'a Job,
    within: bool,
    holds: bool,
    share: f64,
    class: Class,
    team: &'a str,
    /// The team's position in the input (`team_pos`), -1 when not there.
    team_pos: isize,
    id: &'a str,
    submitted: Nanos,
}

/// The pending jobs of one standing, class and team in a cycle's order.
#[derive(Debug, Clone, Copy, Default)]
struct OrderGroup {
    /// The first of them, by position in the keys.
    rep: usize,
    n: usize,
    rank: usize,
}

/// Go's `cmp.Compare` on floats: a NaN is less than any number and equal
/// to a NaN.
pub(super) fn compare_f64(x: f64, y: f64) -> Ordering {
    match (x.is_nan(), y.is_nan()) {
        (true, true) => Ordering::Equal,
        (true, false) => Ordering::Less,
        (false, true) => Ordering::Greater,
        _ => x.partial_cmp(&y).expect("neither is NaN"),
    }
}

/// Orders a key that is true first (the caller has checked that the two
/// differ).
fn before(x: bool) -> Ordering {
    if x { Ordering::Less } else { Ordering::Greater }
}

impl Scheduler {
    /// The pending jobs in the order they are considered. With
    /// `guarantee_first`, claims within their team's guarantee come before
    /// everything else, then by class: otherwise capacity freed while a
    /// team waits for what it is owed goes to a higher class that borrows,
    /// which the claim may then not take back (`protect_production`). Among
    /// the claims, those holding nodes (they evicted for them) come first:
    /// a reclaim that takes the borrower below its guarantee makes its
    /// victims claims too, production outranks the claim, and the victims
    /// started again on the MIG instances they had just left.
    pub(super) fn order<'a>(&mut self, c: &mut Cycle<'a>, incremental: bool) -> Vec<&'a Job> {
        let share = self.share_func(c);
        // A share is its team's: taken once per team in the input (teams
        // not in it, rare, per job).
        let mut team_share: Vec<Option<f64>> = vec![None; c.teams.len()];
        let (jobs, sorted) = self.jobs_to_order(c, incremental);
        let mut ks: Vec<OrderKey<'a>> = Vec::with_capacity(jobs.len());
        for (i, j) in jobs.iter().enumerate() {
            if let Some(ahead) = jobs.get(i + READ_AHEAD) {
                ahead.touch();
            }
            let j = *j;
            if j.phase != Phase::Pending {
                continue;
            }
            let mut k = OrderKey {
                j,
                within: false,
                holds: false,
                share: 0.0,
                class: j.spec.class,
                team: &j.spec.team,
                team_pos: self.team_pos(c, j),
                id: j.id(),
                submitted: j.submitted,
            };
            if self.cfg.order != Order::Fifo {
                let p = k.team_pos;
                k.share = match team_share.get(p as usize) {
                    Some(Some(v)) if p >= 0 => *v,
                    _ => {
                        let v = share.of(self, c, j);
                        if p >= 0 {
                            team_share[p as usize] = Some(v);
                        }
                        v
                    }
                };
            }
            if self.cfg.guarantee_first {
                k.within = self.within_guarantee(c, j);
                k.holds = k.within && self.promised_nodes.contains_key(j.id());
            }
            ks.push(k);
        }
        if !sorted || !self.group_order(c, &mut ks) {
            // Not stable: the keys end with the job's ID, unique in an
            // input, so no two jobs compare equal.
            ks.sort_unstable_by(|x, y| {
                self.order_lead(x, y)
                    .then_with(|| x.submitted.cmp(&y.submitted))
                    .then_with(|| x.id.cmp(y.id))
            });
        }
        ks.into_iter().map(|k| k.j).collect()
    }

    /// Compares the keys of the cycle's order that change from cycle to
    /// cycle; the share is the team's, compared between teams only. The
    /// order ends by submission and ID.
    fn order_lead(&self, x: &OrderKey<'_>, y: &OrderKey<'_>) -> Ordering {
        if x.within != y.within {
            return before(x.within);
        }
        if x.holds != y.holds {
            return before(x.holds);
        }
        if self.cfg.class_order && x.class != y.class {
            return y.class.cmp(&x.class);
        }
        if self.cfg.order != Order::Fifo && x.team != y.team && x.share != y.share {
            return compare_f64(x.share, y.share);
        }
        Ordering::Equal
    }

    /// Sorts `ks`, listed by submission and ID, by `order_lead`, keeping
    /// that order among the jobs it does not tell apart: the full order, as
    /// that is how it ends. The jobs fall in few groups (standing, class,
    /// team), and only the groups are sorted: the sort of a week-1000
    /// run's backlog of a thousand and more jobs, each cycle, was a tenth
    /// of the run.
    fn group_order(&mut self, c: &Cycle<'_>, ks: &mut [OrderKey<'_>]) -> bool {
        const CLASSES: usize = Class::ALL.len();
        let teams = c.teams.len() + 1; // and those not in the input
        let mut b = std::mem::take(&mut self.order_buffers);
        b.groups.clear();
        b.groups.resize(4 * CLASSES * teams, OrderGroup::default());
        b.group_of.clear();
        for (i, k) in ks.iter().enumerate() {
            let standing = usize::from(k.within) * 2 + usize::from(k.holds);
            let team = (k.team_pos + 1) as usize;
            let g = (standing * CLASSES + k.class.index()) * teams + team;
            if b.groups[g].n == 0 {
                b.groups[g].rep = i;
            }
            b.groups[g].n += 1;
            b.group_of.push(g);
        }
        b.used.clear();
        b.used
            .extend((0..b.groups.len()).filter(|&g| b.groups[g].n > 0));
        let groups = &b.groups;
        b.used
            .sort_unstable_by(|&x, &y| self.order_lead(&ks[groups[x].rep], &ks[groups[y].rep]));
        // Groups that lead does not tell apart (two teams of one share)
        // share a rank; each rank's jobs keep their order.
        b.starts.clear();
        for i in 0..b.used.len() {
            let g = b.used[i];
            if i == 0
                || self.order_lead(&ks[b.groups[b.used[i - 1]].rep], &ks[b.groups[g].rep])
                    != Ordering::Equal
            {
                b.starts.push(0);
            }
            let rank = b.starts.len() - 1;
            b.groups[g].rank = rank;
            b.starts[rank] += b.groups[g].n;
        }
        let mut at = 0;
        for s in b.starts.iter_mut() {
            let n = *s;
            *s = at;
            at += n;
        }
        b.sorted.clear();
        b.sorted.resize(ks.len(), 0);
        for i in 0..ks.len() {
            let r = b.groups[b.group_of[i]].rank;
            b.sorted[b.starts[r]] = i;
            b.starts[r] += 1;
        }
        let out: Vec<OrderKey<'_>> = b.sorted.iter().map(|&i| ks[i]).collect();
        ks.copy_from_slice(&out);
        self.order_buffers = b;
        true
    }

    /// The fairness key of a team (lower goes first), as the configured
    /// order computes it.
    fn share_func(&self, c: &Cycle<'_>) -> Share {
        match self.cfg.order {
            Order::FairShare => Share::Fair,
            Order::Drf => self.drf_share(c),
            Order::Fifo => Share::None,
        }
    }

    /// Dominant-resource shares: each team's CPU and memory placed, summed
    /// over the jobs in input order, and the cluster's totals. The sums are
    /// kept by the team's position in the input (`team_pos`), teams not in
    /// it by name: the order asks for a share per pending job.
    fn drf_share(&self, c: &Cycle<'_>) -> Share {
        let (mut tot_gpu, mut tot_cpu, mut tot_mem) = (0.0, 0.0, 0.0);
        for n in c.cluster.nodes() {
            tot_gpu += (1000 * n.gpus().len()) as f64;
            tot_cpu += n.cpu_milli() as f64;
            tot_mem += n.memory_mib() as f64;
        }
        let mut held = vec![(0.0, 0.0); c.teams.len()];
        let mut others: BTreeMap<String, (f64, f64)> = BTreeMap::new();
        for j in c.jobs {
            if j.placed.iter().all(Option::is_none) {
                continue;
            }
            let p = self.team_pos(c, j);
            let sums = if p >= 0 {
                &mut held[p as usize]
            } else {
                others.entry(j.spec.team.clone()).or_insert((0.0, 0.0))
            };
            for a in j.placed.iter().flatten() {
                sums.0 += a.cpu_milli as f64;
                sums.1 += a.memory_mib as f64;
            }
        }
        Share::Drf {
            tot_gpu,
            tot_cpu,
            tot_mem,
            held,
            others,
        }
    }
}

/// How a team's share is computed this cycle.
enum Share {
    None,
    /// A team below its guarantee goes first (key below 0, the further
    /// below the sooner); above it, GPU held over weight.
    Fair,
    /// The team's dominant share of GPU, CPU and memory over weight: the
    /// CPU milli and memory MiB each team holds, by position in the input,
    /// and those of teams not in it.
    Drf {
        tot_gpu: f64,
        tot_cpu: f64,
        tot_mem: f64,
        held: Vec<(f64, f64)>,
        others: BTreeMap<String, (f64, f64)>,
    },
}

/// Go's `max` of floats: a NaN wins.
fn go_max(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        return f64::NAN;
    }
    if a == b {
        // max(-0, +0) is +0.
        return if a.is_sign_negative() { b } else { a };
    }
    if a > b { a } else { b }
}

impl Share {
    fn of(&self, s: &Scheduler, c: &Cycle<'_>, j: &Job) -> f64 {
        match self {
            Share::None => 0.0,
            Share::Fair => {
                let p = s.team_pos(c, j);
                if p < 0 {
                    return 0.0;
                }
                let t = &c.teams[p as usize];
                let used = c.use_[p as usize] as f64;
                if t.guarantee > 0 && used < t.guarantee as f64 {
                    return used / t.guarantee as f64 - 1.0;
                }
                let w = if t.weight <= 0.0 { 1.0 } else { t.weight };
                used / 1000.0 / w
            }
            Share::Drf {
                tot_gpu,
                tot_cpu,
                tot_mem,
                held,
                others,
            } => {
                let p = s.team_pos(c, j);
                let (cpu, mem) = if p >= 0 {
                    held[p as usize]
                } else {
                    others.get(&j.spec.team).copied().unwrap_or((0.0, 0.0))
                };
                let gpu = s.usage_of(c, j) as f64 / tot_gpu;
                let mut dom = go_max(go_max(gpu, cpu / tot_cpu), mem / tot_mem);
                if let Some(t) = s.team_of(c, j)
                    && t.weight > 0.0
                {
                    dom /= t.weight;
                }
                dom
            }
        }
    }
}

#[cfg(test)]
mod tests {
    //! `group_order`, which sorts only the groups of a backlog listed by
    //! submission, gives the order of the full sort, for random keys (Go's
    //! `TestGroupOrderIsTheFullOrder`).

    use super::{OrderKey, Scheduler};
    use crate::random::Rand;
    use crate::sched::config::Order;
    use crate::sched::tests::helpers::{fleet, job, new_scheduler_with};
    use crate::sched::{Input, Job, SECOND, Team};
    use crate::workload::Class;

    #[test]
    fn group_order_is_the_full_order() {
        let mut rng = Rand::new(5);
        let teams: Vec<Team> = ["a", "b", "c"]
            .iter()
            .map(|n| Team {
                name: n.to_string(),
                ..Team::default()
            })
            .collect();
        let st = fleet().nodes(1).gpus(1, "H100-80GB").build();
        let configs = [
            (Order::FairShare, true, true),
            (Order::Fifo, false, true),
            (Order::Drf, false, false),
        ];
        for (order, guarantee_first, class_order) in configs {
            let mut sch: Scheduler = new_scheduler_with("naive", &st, 1, |c| {
                c.order = order;
                c.guarantee_first = guarantee_first;
                c.class_order = class_order;
            });
            for round in 0..200 {
                let mut shares = [rng.float64(), rng.float64(), rng.float64(), rng.float64()];
                if rng.below(2) == 0 {
                    shares[1] = shares[0]; // two teams of one share: their jobs interleave
                }
                let n = 1 + rng.below(60);
                let mut jobs: Vec<Job> = Vec::new();
                let mut keys = Vec::new();
                for i in 0..n {
                    let team = ["a", "b", "c", "elsewhere"][rng.below(4)];
                    let mut j = job(&format!("j{i}")).team(team).build();
                    j.submitted = rng.below(8) as i64 * SECOND;
                    let class = Class::ALL[rng.below(3)];
                    let within = rng.below(2) == 0;
                    let pos = teams
                        .iter()
                        .position(|t| t.name == team)
                        .map_or(0, |p| p + 1);
                    let holds = within && rng.below(4) == 0;
                    keys.push((class, within, holds, shares[pos]));
                    jobs.push(j);
                }
                let refs: Vec<&Job> = jobs.iter().collect();
                let input = Input::new(0, &st, &teams, &refs);
                let c = sch.snapshot(&input);
                let mut ks: Vec<OrderKey<'_>> = refs
                    .iter()
                    .zip(&keys)
                    .map(|(&j, &(class, within, holds, share))| OrderKey {
                        j,
                        within,
                        holds,
                        share,
                        class,
                        team: &j.spec.team,
                        team_pos: teams
                            .iter()
                            .position(|t| t.name == j.spec.team)
                            .map_or(-1, |p| p as isize),
                        id: j.id(),
                        submitted: j.submitted,
                    })
                    .collect();
                ks.sort_by(|x, y| x.submitted.cmp(&y.submitted).then_with(|| x.id.cmp(y.id)));
                let mut want = ks.clone();
                want.sort_by(|x, y| sch.order_lead(x, y));
                assert!(
                    sch.group_order(&c, &mut ks),
                    "group_order refused known classes"
                );
                let got: Vec<&str> = ks.iter().map(|k| k.id).collect();
                let want: Vec<&str> = want.iter().map(|k| k.id).collect();
                assert_eq!(got, want, "{order:?}, round {round}");
            }
        }
    }
}
