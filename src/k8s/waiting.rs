//! Why a pod waits, in the words the scheduler writes on it (the
//! FailedScheduling Event and the PodScheduled condition, see `events`)
//! and the worker reads back for the portal's queue. One place for the
//! format, so that the two sides agree.

use k8s_openapi::api::core::v1::Pod;

/// Marks the scheduler's words among other schedulers'.
const PREFIX: &str = "partita: ";
/// What the scheduler adds after the reason; the worker works the
/// position out itself, since the condition is written only when the
/// reason changes and the position moves all the time.
const POSITION: &str = " (position ";

/// The note of a waiting pod's Event and condition: `reason` is the
/// engine's reason, with the queue position the cycle gave.
pub fn message(reason: &str) -> String {
    format!("{PREFIX}{reason}")
}

/// The reason in a message `message` made, without the queue position;
/// None for another scheduler's words.
pub fn reason_in_message(msg: &str) -> Option<&str> {
    let reason = msg.strip_prefix(PREFIX)?;
    Some(reason.split_once(POSITION).map_or(reason, |(r, _)| r))
}

/// Why Partita's scheduler last said `pod` waits: its PodScheduled
/// condition, when False and in the scheduler's words.
pub fn reason_of(pod: &Pod) -> Option<&str> {
    let conditions = pod.status.as_ref()?.conditions.as_ref()?;
    let c = conditions.iter().find(|c| c.type_ == "PodScheduled")?;
    if c.status != "False" {
        return None;
    }
    reason_in_message(c.message.as_deref()?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{PodCondition, PodStatus};
    use proptest::prelude::*;

    fn pod(status: &str, message: &str) -> Pod {
        Pod {
            status: Some(PodStatus {
                conditions: Some(vec![PodCondition {
                    type_: "PodScheduled".into(),
                    status: status.into(),
                    message: Some(message.into()),
                    reason: Some("Unschedulable".into()),
                    ..PodCondition::default()
                }]),
                ..PodStatus::default()
            }),
            ..Pod::default()
        }
    }

    #[test]
    fn the_worker_reads_what_the_scheduler_wrote() {
        let written = message("quota: the team is at its limit (position 3 in queue search)");
        assert_eq!(
            reason_of(&pod("False", &written)),
            Some("quota: the team is at its limit")
        );
        // A held gang's reason has no position.
        let held = message("waiting for its PodGroup");
        assert_eq!(
            reason_of(&pod("False", &held)),
            Some("waiting for its PodGroup")
        );
        // Bound since, or another scheduler's words: nothing.
        assert_eq!(reason_of(&pod("True", &written)), None);
        assert_eq!(
            reason_of(&pod(
                "False",
                "0/3 nodes are available: 3 Insufficient cpu."
            )),
            None
        );
        assert_eq!(reason_of(&Pod::default()), None);
    }

    proptest! {
        #[test]
        fn any_reason_comes_back(reason in "[^(]{0,40}", position in 0usize..1000, queue in "[a-z-]{0,12}") {
            let written = message(&format!("{reason} (position {position} in queue {queue})"));
            prop_assert_eq!(reason_in_message(&written), Some(reason.as_str()));
            let bare = message(&reason);
            prop_assert_eq!(reason_in_message(&bare), Some(reason.as_str()));
        }
    }
}
