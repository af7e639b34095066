//! Events on pods ("Scheduled", "FailedScheduling", "Preempting"), written
//! with a budget of their own so that they never slow binds, and
//! aggregated rather than dropped (issue 48, item 6: the Go build's
//! recorder shared the bind client's rate limit and lost most `Scheduled`
//! events of a burst).

use k8s_openapi::api::core::v1::Pod;

/// The event type: Normal or Warning.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventType {
    Normal,
    Warning,
}

/// A handle to the recorder; cheap to clone. `record` never blocks and
/// never makes an API call itself.
#[derive(Debug, Clone)]
pub struct Events {}

impl Events {
    /// Records an event on `pod`: `reason` is a CamelCase word
    /// ("Scheduled"), `note` the human text.
    pub fn record(&self, pod: &Pod, kind: EventType, reason: &str, note: &str) {
        let _ = (pod, kind, reason, note);
        todo!("issue 48: the event recorder")
    }
}
