//! The production reserve (`Config::production_reserve`): GPU kept free of
//! borrowed lower-class work and borrowed production on whole GPUs, so that
//! production starts without evicting anyone. It trades utilization for
//! production latency (docs/mixed.md).

use super::Scheduler;
use super::preempt::on_whole_gpus;
use super::snapshot::Cycle;
use super::types::{Job, WaitReason};
use crate::workload::Class;

impl Scheduler {
    /// Whether the reserve keeps `j` waiting: `j` is held by it and
    /// starting it would leave less than the reserve free.
    pub(super) fn kept_for_production<'a>(
        &mut self,
        c: &mut Cycle<'a>,
        j: &'a Job,
    ) -> Option<WaitReason> {
        let reserve = self.cfg.production_reserve;
        if reserve <= 0 || !self.reserve_holds(c, j) {
            return None;
        }
        let demand = self.demand_of(j);
        (c.free_now() - demand < reserve).then_some(WaitReason::ProdReserve)
    }

    /// Whether the production reserve holds `j` back: work beyond its
    /// team's guarantee, of a class below production or production on
    /// whole GPUs. A 70B service beyond its team's guarantee took 4 of the
    /// last free GPUs at once, and the claims and the services on MIG that
    /// came next had to evict. (Holding all borrowed production cut
    /// violations further but left the production p95 over 30 s on almost
    /// every seed.)
    fn reserve_holds<'a>(&mut self, c: &mut Cycle<'a>, j: &'a Job) -> bool {
        if self.within_guarantee(c, j) {
            return false;
        }
        j.spec.class < Class::Production || on_whole_gpus(j)
    }
}
