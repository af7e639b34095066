//! The devices a pod was granted, as annotations on its Binding and read
//! back from the pod (port of go/internal/kube/devices.go).

use std::collections::BTreeMap;

use partita_engine::cluster::{Assignment, Grant};
use partita_engine::gpu::Placement;
use partita_engine::quote::quote;

use super::names::{ANNOTATION_GPU_SHARE, ANNOTATION_GPUS, ANNOTATION_MIG_SLICE};

/// What an assignment grants, for the Binding: whole GPUs as
/// partita.dev/gpus "0,1", a MIG instance as partita.dev/mig-slice
/// "2:3g.40gb@4", a share as partita.dev/gpu-share "0:300". An assignment
/// without GPUs gives none.
pub fn device_annotations(a: &Assignment) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut whole: Vec<String> = Vec::new();
    for g in &a.grants {
        if let Some(slice) = &g.slice {
            out.insert(
                ANNOTATION_MIG_SLICE.to_string(),
                format!("{}:{slice}", g.gpu),
            );
        } else if g.milli >= 1000 {
            whole.push(g.gpu.to_string());
        } else {
            out.insert(
                ANNOTATION_GPU_SHARE.to_string(),
                format!("{}:{}", g.gpu, g.milli),
            );
        }
    }
    if !whole.is_empty() {
        out.insert(ANNOTATION_GPUS.to_string(), whole.join(","));
    }
    out
}

/// Why a pod's device annotations cannot be read; the texts are the Go
/// build's (`%q` is `quote`).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum DeviceAnnotationError {
    #[error("annotation {ANNOTATION_GPUS}={}: want GPU indices such as 0,1", quote(.text))]
    Gpus { text: String },
    #[error("annotation {ANNOTATION_MIG_SLICE}={}: want <gpu>:<profile>@<start>", quote(.text))]
    MigSliceSyntax { text: String },
    #[error("annotation {ANNOTATION_MIG_SLICE}: {source}")]
    MigSlicePlacement {
        source: partita_engine::gpu::GpuError,
    },
    #[error("annotation {ANNOTATION_GPU_SHARE}={}: want <gpu>:<milli>", quote(.text))]
    GpuShare { text: String },
}

/// Reads back what `device_annotations` wrote. `Ok(None)` when the pod
/// carries none of the annotations; an error means they are there but
/// unreadable.
pub fn grants_from_annotations(
    ann: &BTreeMap<String, String>,
) -> Result<Option<Vec<Grant>>, DeviceAnnotationError> {
    let mut found = false;
    let mut grants = Vec::new();
    if let Some(text) = ann.get(ANNOTATION_GPUS) {
        found = true;
        for part in text.split(',') {
            // Go's strings.TrimSpace trims Unicode white space, as trim() does.
            match go_atoi(part.trim()) {
                Some(i) if i >= 0 => grants.push(Grant {
                    gpu: i,
                    milli: 1000,
                    slice: None,
                }),
                _ => return Err(DeviceAnnotationError::Gpus { text: text.clone() }),
            }
        }
    }
    if let Some(text) = ann.get(ANNOTATION_MIG_SLICE) {
        found = true;
        let syntax = || DeviceAnnotationError::MigSliceSyntax { text: text.clone() };
        let (idx, placement) = text.split_once(':').ok_or_else(syntax)?;
        let i = go_atoi(idx).filter(|i| *i >= 0).ok_or_else(syntax)?;
        let p = Placement::parse(placement)
            .map_err(|source| DeviceAnnotationError::MigSlicePlacement { source })?;
        grants.push(Grant {
            gpu: i,
            milli: 0,
            slice: Some(p),
        });
    }
    if let Some(text) = ann.get(ANNOTATION_GPU_SHARE) {
        found = true;
        let bad = || DeviceAnnotationError::GpuShare { text: text.clone() };
        let (idx, m) = text.split_once(':').ok_or_else(bad)?;
        let (Some(i), Some(milli)) = (go_atoi(idx), go_atoi(m)) else {
            return Err(bad());
        };
        if i < 0 || !(1..=1000).contains(&milli) {
            return Err(bad());
        }
        grants.push(Grant {
            gpu: i,
            milli,
            slice: None,
        });
    }
    Ok(found.then_some(grants))
}

/// Go's strconv.Atoi as far as these annotations need it: an optional sign
/// and decimal digits, nothing else. Rust's parse accepts the same text;
/// the GPU index is an i32 in the engine, so a larger number is refused
/// here where Go would refuse it later (no node has that GPU).
fn go_atoi(s: &str) -> Option<i32> {
    s.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ann(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn whole(gpu: i32) -> Grant {
        Grant {
            gpu,
            milli: 1000,
            slice: None,
        }
    }

    // TestDeviceAnnotationsRoundTrip.
    #[test]
    fn device_annotations_round_trip() {
        let slice = Placement::new("3g.40gb", 4);
        let cases: Vec<(&str, Vec<Grant>, BTreeMap<String, String>)> = vec![
            (
                "whole GPUs",
                vec![whole(0), whole(3)],
                ann(&[(ANNOTATION_GPUS, "0,3")]),
            ),
            (
                "a MIG instance",
                vec![Grant {
                    gpu: 2,
                    milli: 0,
                    slice: Some(slice),
                }],
                ann(&[(ANNOTATION_MIG_SLICE, "2:3g.40gb@4")]),
            ),
            (
                "a share",
                vec![Grant {
                    gpu: 1,
                    milli: 250,
                    slice: None,
                }],
                ann(&[(ANNOTATION_GPU_SHARE, "1:250")]),
            ),
            ("no GPU", vec![], ann(&[])),
        ];
        for (name, grants, want) in cases {
            let a = Assignment {
                grants: grants.clone(),
                ..Assignment::default()
            };
            let got = device_annotations(&a);
            assert_eq!(got, want, "{name}: annotations");
            let back = grants_from_annotations(&got).unwrap_or_else(|e| panic!("{name}: {e}"));
            if grants.is_empty() {
                assert_eq!(back, None, "{name}: read back");
            } else {
                assert_eq!(back, Some(grants), "{name}: read back");
            }
        }
    }

    // TestGrantsFromBadAnnotations.
    #[test]
    fn grants_from_bad_annotations() {
        for (k, v) in [
            (ANNOTATION_GPUS, "0,x"),
            (ANNOTATION_GPUS, "-1"),
            (ANNOTATION_MIG_SLICE, "3g.40gb@4"),
            (ANNOTATION_MIG_SLICE, "0:3g.40gb@9"),
            (ANNOTATION_GPU_SHARE, "0:0"),
            (ANNOTATION_GPU_SHARE, "0:1001"),
        ] {
            let got = grants_from_annotations(&ann(&[(k, v)]));
            assert!(got.is_err(), "{k}={v}: {got:?}, want an error");
        }
    }

    // The error texts name the annotation and the bad value, as Go's do.
    #[test]
    fn bad_annotation_messages() {
        let e = grants_from_annotations(&ann(&[(ANNOTATION_GPUS, "0,x")])).unwrap_err();
        assert_eq!(
            e.to_string(),
            "annotation partita.dev/gpus=\"0,x\": want GPU indices such as 0,1"
        );
        let e = grants_from_annotations(&ann(&[(ANNOTATION_GPU_SHARE, "0:0")])).unwrap_err();
        assert_eq!(
            e.to_string(),
            "annotation partita.dev/gpu-share=\"0:0\": want <gpu>:<milli>"
        );
    }

    // FuzzGrantsFromAnnotations: whatever the three annotations say, the
    // reader never panics, and what it accepts is a grant the engine can
    // take (a GPU index at least 0; a share from 1 to 1000 milli).
    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 2000, ..Default::default() })]
        #[test]
        fn grants_from_any_annotations_are_sane_or_refused(
            gpus in "[-0-9, a-z:@.]{0,16}|\\PC{0,8}",
            slice in "[-0-9a-z:@.g]{0,16}|[0-9]:[1-7]g\\.[0-9]{1,3}gb@[0-9]|\\PC{0,8}",
            share in "[-0-9:, ]{0,12}|[0-9]:[0-9]{1,5}",
        ) {
            let a = ann(&[
                (ANNOTATION_GPUS, gpus.as_str()),
                (ANNOTATION_MIG_SLICE, slice.as_str()),
                (ANNOTATION_GPU_SHARE, share.as_str()),
            ]);
            if let Ok(Some(grants)) = grants_from_annotations(&a) {
                for g in grants {
                    proptest::prop_assert!(g.gpu >= 0, "{g:?} from {a:?}");
                    proptest::prop_assert!(
                        g.slice.is_some() || (1..=1000).contains(&g.milli),
                        "{g:?} from {a:?}"
                    );
                }
            }
        }
    }
}
