//! Clocks on the portal's pages. The virtual cluster runs on scaled time
//! (`api::Clock`: cluster seconds per wall second), so a page never shows
//! a time without saying which clock it is in: cluster times say
//! "cluster", wall times say "wall", and an estimated start in cluster
//! time also gives the wall time it corresponds to where the two differ.

use chrono::{DateTime, Utc};

use crate::server::AppState;

/// A publication older than this (wall time) means no worker runs: the
/// cluster clock stands still and no wall time corresponds to a later
/// cluster time.
const STALE_SECS: i64 = 15;

/// The cluster's clock as the worker last published it.
#[derive(Debug, Clone)]
pub struct ClusterClock {
    /// Cluster time of the last publication (or, before any, the cluster
    /// time the API stamps submissions with).
    pub now: DateTime<Utc>,
    /// Cluster seconds per wall second; 0 before any worker published.
    pub speed: f64,
    /// Wall time of the last publication.
    pub published_at: Option<DateTime<Utc>>,
    /// Whether the publication is recent: a worker runs the clock.
    pub running: bool,
}

impl ClusterClock {
    /// Reads the last publication's clock (no API call: the clock is the
    /// same for every role).
    pub async fn read(state: &AppState) -> ClusterClock {
        let row = sqlx::query!(
            r#"SELECT cluster_time, speed, published_at
               FROM worker_views WHERE kind = 'cluster'"#
        )
        .fetch_optional(&state.pool)
        .await
        .ok()
        .flatten();
        match row {
            Some(r) => ClusterClock {
                now: r.cluster_time,
                speed: r.speed,
                published_at: Some(r.published_at),
                running: (Utc::now() - r.published_at).num_seconds() < STALE_SECS,
            },
            None => {
                let now = match state.pool.acquire().await {
                    Ok(mut conn) => crate::worker::clock::cluster_now(&mut conn)
                        .await
                        .ok()
                        .flatten(),
                    Err(_) => None,
                };
                ClusterClock {
                    now: now.unwrap_or_else(Utc::now),
                    speed: 0.0,
                    published_at: None,
                    running: false,
                }
            }
        }
    }

    /// The same clock with the cluster time an API answer carries (a
    /// queue or cluster answer may be newer than the clock read first).
    pub fn with_now(mut self, c: &crate::api::Clock) -> ClusterClock {
        if c.speed > 0.0 {
            self.now = c.now;
            self.speed = c.speed;
        }
        self
    }

    /// Whether cluster time runs at another pace than wall time, so that
    /// a cluster time's wall time is worth saying.
    pub fn scaled(&self) -> bool {
        self.speed > 0.0 && (self.speed - 1.0).abs() > 1e-9
    }

    /// The wall time at which the cluster clock reaches `cluster`: the
    /// publication's wall time plus the cluster seconds from its cluster
    /// time over the speed. None while no worker runs the clock.
    pub fn wall_of(&self, cluster: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let published = self.published_at?;
        if !self.running || self.speed <= 0.0 {
            return None;
        }
        let cluster_ms = (cluster - self.now).num_milliseconds() as f64;
        let wall_ms = (cluster_ms / self.speed).round() as i64;
        Some(published + chrono::Duration::milliseconds(wall_ms))
    }

    /// The footer's sentence: the cluster time and its speed.
    pub fn footer(&self) -> String {
        let mut s = format!("Cluster time {} UTC", when(self.now));
        if self.speed <= 0.0 {
            s.push_str(" · no worker has run the cluster clock yet");
        } else if !self.running {
            s.push_str(" · the cluster clock stands still: no worker runs");
        } else if self.scaled() {
            s.push_str(&format!(
                " · the virtual cluster runs at {}× wall time",
                speed_text(self.speed)
            ));
        } else {
            s.push_str(" · cluster time runs at wall speed");
        }
        s
    }

    /// An estimated start, labelled: the cluster time and, where the
    /// clocks differ, the wall time it corresponds to; `wait` is the
    /// wall seconds from the publication the API gives.
    pub fn estimate(&self, cluster: Option<DateTime<Utc>>, wait: Option<f64>) -> Estimate {
        let Some(at) = cluster else {
            return Estimate::default();
        };
        let wall = if self.scaled() {
            self.wall_of(at).map(|w| format!("{} UTC wall", when(w)))
        } else {
            None
        };
        Estimate {
            cluster: format!("{} cluster", when(at)),
            wall: wall.unwrap_or_default(),
            wait: wait.map(wait_text).unwrap_or_default(),
        }
    }
}

/// An estimated start in words: its cluster time, the wall time it
/// corresponds to (empty where the clocks agree or none runs), and the
/// wait in wall time.
#[derive(Debug, Clone, Default)]
pub struct Estimate {
    pub cluster: String,
    pub wall: String,
    pub wait: String,
}

impl Estimate {
    pub fn is_known(&self) -> bool {
        !self.cluster.is_empty()
    }
}

/// A time to the second, as the Go portal writes it: "Dec 5 07:30:00".
pub fn when(t: DateTime<Utc>) -> String {
    t.format("%b %-d %H:%M:%S").to_string()
}

/// An optional time, or a dash.
pub fn when_opt(t: Option<DateTime<Utc>>) -> String {
    t.map(when).unwrap_or_else(|| "—".into())
}

fn speed_text(speed: f64) -> String {
    if (speed - speed.round()).abs() < 1e-9 {
        format!("{}", speed.round() as i64)
    } else {
        format!("{speed:.2}")
    }
}

/// A wait in wall time, roughly: "in 5 min wall".
pub fn wait_text(secs: f64) -> String {
    if !secs.is_finite() || secs < 1.0 {
        return "now".into();
    }
    if secs < 60.0 {
        format!("in {} s wall", secs as i64)
    } else if secs < 3600.0 {
        format!("in {} min wall", (secs / 60.0) as i64)
    } else {
        format!("in {:.1} h wall", secs / 3600.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn clock(speed: f64) -> ClusterClock {
        let published = Utc::now();
        ClusterClock {
            now: "2026-01-01T00:00:00Z".parse().unwrap(),
            speed,
            published_at: Some(published),
            running: true,
        }
    }

    #[test]
    fn a_cluster_time_maps_to_wall_time_at_the_clock_speed() {
        let c = clock(60.0);
        let at: DateTime<Utc> = "2026-01-01T01:00:00Z".parse().unwrap();
        // An hour of cluster time at 60x is a minute of wall time.
        let wall = c.wall_of(at).unwrap();
        assert_eq!((wall - c.published_at.unwrap()).num_seconds(), 60);
        let e = c.estimate(Some(at), Some(60.0));
        assert!(e.cluster.ends_with("cluster"), "{e:?}");
        assert!(e.wall.ends_with("UTC wall"), "{e:?}");
        assert_eq!(e.wait, "in 1 min wall");
        // At wall speed only the cluster time is shown.
        let e = clock(1.0).estimate(Some(at), None);
        assert!(e.wall.is_empty());
        let mut stopped = clock(60.0);
        stopped.running = false;
        assert!(stopped.wall_of(at).is_none());
    }
}
