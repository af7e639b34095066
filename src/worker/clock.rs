//! The virtual cluster's clock: cluster time runs `speed` times faster
//! than the wall clock while a worker is active and stands still while
//! none is, so a restart (or a takeover) resumes where it stopped and
//! never jumps.
//!
//! Persisted as the Go build does, in `meta` (`go/internal/store/meta.go`):
//! `epoch` is the wall time of cluster time zero (Unix nanoseconds; a
//! cluster time `t` is shown as the timestamp `epoch + t`) and `clock` the
//! cluster time of the worker's last tick (nanoseconds). The worker also
//! writes `clock_wall` (the wall time of that tick, Unix nanoseconds) and
//! `speed`, so that another process (the API) can tell the cluster time
//! now without asking the worker (`cluster_now`).

use std::time::Instant;

use chrono::{DateTime, TimeDelta, Utc};
use partita_engine::sched::{Nanos, SECOND};
use sqlx::PgConnection;

/// Cluster time as the worker runs it: from `base` at `wall_base`, `speed`
/// times faster than the wall clock.
#[derive(Debug, Clone)]
pub struct Clock {
    /// The wall time of cluster time zero.
    pub epoch: DateTime<Utc>,
    base: Nanos,
    wall_base: Instant,
    speed: f64,
}

impl Clock {
    /// A clock at cluster time `base` now.
    pub fn new(epoch: DateTime<Utc>, base: Nanos, speed: f64) -> Clock {
        Clock {
            epoch,
            base,
            wall_base: Instant::now(),
            speed,
        }
    }

    /// The cluster time now, in whole seconds (rounded down). The worker
    /// records every transition at a whole second, so that a ledger row's
    /// GPU-seconds are an exact integer (jobs' durations are whole seconds
    /// too); at the default speed a tick is several cluster seconds anyway.
    pub fn now(&self) -> Nanos {
        let t = self.exact_now();
        t - t.rem_euclid(SECOND)
    }

    /// The cluster time now, to the nanosecond.
    fn exact_now(&self) -> Nanos {
        let ran = self.wall_base.elapsed().as_secs_f64() * self.speed * 1e9;
        self.base.saturating_add(ran as Nanos)
    }

    /// How long the wall clock takes to reach cluster time `t`.
    pub fn wall_until(&self, t: Nanos) -> std::time::Duration {
        let ahead = (t - self.now()).max(0) as f64 / self.speed / 1e9;
        std::time::Duration::from_secs_f64(ahead)
    }

    pub fn speed(&self) -> f64 {
        self.speed
    }

    /// Cluster time `t` as a timestamp.
    pub fn at(&self, t: Nanos) -> DateTime<Utc> {
        at(self.epoch, t)
    }

    /// A timestamp back in cluster time.
    pub fn since(&self, ts: DateTime<Utc>) -> Nanos {
        since(self.epoch, ts)
    }
}

/// Cluster time `t` as a timestamp, given the epoch.
pub fn at(epoch: DateTime<Utc>, t: Nanos) -> DateTime<Utc> {
    epoch + TimeDelta::nanoseconds(t)
}

/// A timestamp back in cluster time, given the epoch.
pub fn since(epoch: DateTime<Utc>, ts: DateTime<Utc>) -> Nanos {
    (ts - epoch).num_nanoseconds().unwrap_or(Nanos::MAX)
}

/// Reads the stored clock (epoch and cluster time), starting it at the
/// wall time now (a whole second) on a database without one.
pub async fn load(conn: &mut PgConnection) -> Result<(DateTime<Utc>, Nanos), sqlx::Error> {
    let now = Utc::now().timestamp() * SECOND;
    // ON CONFLICT: two workers starting at once agree on one epoch.
    sqlx::query!(
        "INSERT INTO meta (key, value) VALUES ('epoch', $1), ('clock', '0') ON CONFLICT (key) DO NOTHING",
        now.to_string()
    )
    .execute(&mut *conn)
    .await?;
    let rows = sqlx::query!("SELECT key, value FROM meta WHERE key IN ('epoch', 'clock')")
        .fetch_all(&mut *conn)
        .await?;
    let mut epoch_ns = now;
    let mut clock = 0;
    for r in rows {
        let v: i64 = r.value.parse().map_err(|_| {
            sqlx::Error::Protocol(format!("meta {}: {:?} is not an integer", r.key, r.value))
        })?;
        match r.key.as_str() {
            "epoch" => epoch_ns = v,
            _ => clock = v,
        }
    }
    Ok((DateTime::from_timestamp_nanos(epoch_ns), clock))
}

/// Stores cluster time `t` (in the tick's transaction), with the wall
/// time at which `clock` reached it: `t` is a whole second, up to a
/// second behind the clock, and stored beside the wall time now it would
/// make `cluster_now` step back by as much at each tick (and jobs
/// submitted a moment apart be stamped out of order).
pub async fn save(conn: &mut PgConnection, clock: &Clock, t: Nanos) -> Result<(), sqlx::Error> {
    let speed = clock.speed();
    let behind = (clock.exact_now() - t).max(0) as f64 / speed;
    let wall = Utc::now().timestamp_nanos_opt().unwrap_or(0) - behind as i64;
    sqlx::query!(
        "INSERT INTO meta (key, value)
         SELECT * FROM UNNEST($1::text[], $2::text[])
         ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        &["clock".to_string(), "clock_wall".into(), "speed".into()][..],
        &[t.to_string(), wall.to_string(), speed.to_string()][..],
    )
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// The cluster time now as another process sees it: the last tick's, plus
/// the wall time since at the worker's speed while an active worker was
/// seen in the last 10 s (else the clock stands still); in microseconds.
/// `None` before any worker started the clock. The rule is the SQL
/// function `cluster_now()` (`migrations/0009_cluster_now.sql`), which the
/// submissions' statement calls too.
pub async fn cluster_now(conn: &mut PgConnection) -> Result<Option<DateTime<Utc>>, sqlx::Error> {
    sqlx::query_scalar!("SELECT cluster_now()")
        .fetch_one(&mut *conn)
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cluster_time_starts_at_its_base_in_whole_seconds_and_maps_to_timestamps() {
        let epoch = DateTime::from_timestamp(1_700_000_000, 0).unwrap();
        let c = Clock::new(epoch, 90 * SECOND + 5, 60.0);
        let now = c.now();
        assert!(now >= 90 * SECOND && now % SECOND == 0, "{now}");
        assert_eq!(c.since(c.at(now)), now);
        assert_eq!(c.at(0), epoch);
    }
}
